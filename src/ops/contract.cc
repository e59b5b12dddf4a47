// User-facing contractions: matmul (numpy.matmul semantics on top of dot_general) and
// dot_general itself (negative dims allowed, operands promoted to one dtype).
#include <algorithm>

#include <fmt/format.h>

#include "ops/op_util.h"
#include "prims/ids/contract.h"

namespace kiln {
namespace {

Shape sub_shape(const Shape& shape, int64_t begin, int64_t end) {
  Shape out;
  for (int64_t axis = begin; axis < end; ++axis) out.dims().push_back(shape[axis]);
  return out;
}

Shape concat(const Shape& a, const Shape& b) {
  Shape out = a;
  for (int64_t dim : b.dims()) out.dims().push_back(dim);
  return out;
}

bool all_ones(const Shape& shape) {
  return std::all_of(shape.dims().begin(), shape.dims().end(), [](int64_t d) { return d == 1; });
}

// numpy broadcasting of the batch axes (all but the last two), with an error naming both
// operands.
Shape broadcast_batch(const Array& a, const Array& b, const Shape& a_batch, const Shape& b_batch,
                      CallSite site) {
  int64_t rank = std::max(a_batch.rank(), b_batch.rank());
  Shape out;
  for (int64_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a_batch.rank() ? 1 : a_batch[i - (rank - a_batch.rank())];
    int64_t db = i < rank - b_batch.rank() ? 1 : b_batch[i - (rank - b_batch.rank())];
    if (da != db && da != 1 && db != 1) {
      fail(site,
           fmt::format("matmul: the batch axes {} of {} and {} of {} cannot be broadcast "
                       "together ({} vs {})",
                       a_batch.to_string(), a.aval().to_string(), b_batch.to_string(),
                       b.aval().to_string(), da, db),
           "batch axes (all but the last two) broadcast like numpy: aligned from the right, "
           "each must match or be 1");
    }
    out.dims().push_back(da == 1 ? db : da);
  }
  return out;
}

}  // namespace

Array matmul(const Array& a, const Array& b, CallSite site) {
  if (!a.defined() || !b.defined()) {
    fail(site, "matmul: an operand is an empty Array (default-constructed)");
  }
  if (a.rank() == 0 || b.rank() == 0) {
    fail(site,
         fmt::format("matmul: operands need at least one axis, got {} and {}", a.aval().to_string(),
                     b.aval().to_string()),
         "multiply by a scalar with mul (or *)");
  }
  auto [pa, pb] = promote_operands(a, b, site);
  if (pa.dtype() == DType::bool_) {
    fail(site,
         fmt::format("matmul: bool operands are not supported, got {} and {}", a.aval().to_string(),
                     b.aval().to_string()),
         "convert first, e.g. astype(x, DType::f32)");
  }
  // numpy: a 1-D lhs is a row vector, a 1-D rhs a column vector; the added axis goes again.
  bool drop_m = pa.rank() == 1, drop_n = pb.rank() == 1;
  if (drop_m) pa = reshape(pa, Shape{1, pa.dim(0)}, site);
  if (drop_n) pb = reshape(pb, Shape{pb.dim(0), 1}, site);
  int64_t m = pa.dim(-2), k = pa.dim(-1), k2 = pb.dim(-2), n = pb.dim(-1);
  if (k != k2) {
    fail(site,
         fmt::format("matmul: shapes {} and {} do not line up: the lhs's last axis has {} "
                     "but the rhs's {} axis has {}",
                     a.aval().to_string(), b.aval().to_string(), k,
                     b.rank() == 1 ? "only" : "second-to-last", k2),
         "matmul contracts a's last axis with b's second-to-last; if an operand is stored "
         "the other way round, transpose it first (e.g. matmul(a, transpose(b)))");
  }
  Shape a_batch = sub_shape(pa.shape(), 0, pa.rank() - 2);
  Shape b_batch = sub_shape(pb.shape(), 0, pb.rank() - 2);
  Shape batch = broadcast_batch(a, b, a_batch, b_batch, site);
  Array out;
  if (all_ones(b_batch)) {
    // One rhs matrix for every lhs matrix: fold the lhs batch into its rows (free reshapes).
    Array a2 = reshape(pa, Shape{a_batch.num_elements() * m, k}, site);
    Array b2 = reshape(pb, Shape{k, n}, site);
    Array c = bind1(prim::dot_general, {a2, b2}, DotGeneralParams{{1}, {0}, {}, {}, {}}, site);
    out = reshape(c, concat(batch, Shape{m, n}), site);
  } else {
    Array a3 = a_batch == batch ? pa : broadcast_to(pa, concat(batch, Shape{m, k}), site);
    Array b3 = b_batch == batch ? pb : broadcast_to(pb, concat(batch, Shape{k, n}), site);
    int64_t nb = batch.rank();
    DotGeneralParams params{{nb + 1}, {nb}, {}, {}, {}};
    for (int64_t axis = 0; axis < nb; ++axis) {
      params.lhs_batch.push_back(axis);
      params.rhs_batch.push_back(axis);
    }
    out = bind1(prim::dot_general, {a3, b3}, params, site);
  }
  if (drop_m || drop_n) {
    Shape shape = batch;
    if (!drop_m) shape.dims().push_back(m);
    if (!drop_n) shape.dims().push_back(n);
    out = reshape(out, shape, site);
  }
  return out;
}

Array dot_general(const Array& a, const Array& b, Dims lhs_contracting, Dims rhs_contracting,
                  Dims lhs_batch, Dims rhs_batch, std::optional<DType> preferred_element_type,
                  CallSite site) {
  if (!a.defined() || !b.defined()) {
    fail(site, "dot_general: an operand is an empty Array (default-constructed)");
  }
  for (int64_t& axis : lhs_contracting) axis = user_axis("dot_general", axis, a.rank(), site);
  for (int64_t& axis : lhs_batch) axis = user_axis("dot_general", axis, a.rank(), site);
  for (int64_t& axis : rhs_contracting) axis = user_axis("dot_general", axis, b.rank(), site);
  for (int64_t& axis : rhs_batch) axis = user_axis("dot_general", axis, b.rank(), site);
  auto [pa, pb] = promote_operands(a, b, site);
  return bind1(prim::dot_general, {pa, pb},
               DotGeneralParams{std::move(lhs_contracting), std::move(rhs_contracting),
                                std::move(lhs_batch), std::move(rhs_batch), preferred_element_type},
               site);
}

}  // namespace kiln
