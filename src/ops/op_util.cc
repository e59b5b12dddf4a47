// Broadcasting and promotion for the user-facing ops.
#include "ops/op_util.h"

#include <algorithm>

#include <fmt/format.h>

#include "kiln/promotion.h"

namespace kiln {

std::pair<Array, Array> promote_operands(const Array& a, const Array& b, CallSite site) {
  PromotedType common = promote({a.dtype(), a.weak_type()}, {b.dtype(), b.weak_type()});
  Array pa = a.dtype() == common.dtype ? a : astype(a, common.dtype, site);
  Array pb = b.dtype() == common.dtype ? b : astype(b, common.dtype, site);
  return {pa, pb};
}

Shape broadcast_shapes(std::string_view op, const AbstractValue& a, const AbstractValue& b,
                       CallSite site) {
  int64_t rank = std::max(a.shape.rank(), b.shape.rank());
  Shape out;
  for (int64_t i = 0; i < rank; ++i) {
    // Align from the right, as numpy does.
    int64_t da = i < rank - a.shape.rank() ? 1 : a.shape[i - (rank - a.shape.rank())];
    int64_t db = i < rank - b.shape.rank() ? 1 : b.shape[i - (rank - b.shape.rank())];
    if (da != db && da != 1 && db != 1) {
      fail(site,
           fmt::format("{}: shapes {} and {} cannot be broadcast together (axis {}: {} vs {})", op,
                       a.to_string(), b.to_string(), i - rank, da, db),
           "numpy broadcasting aligns shapes from the right; each axis must match or be 1. "
           "Use reshape or expand_dims to line the axes up");
    }
    out.dims().push_back(da == 1 ? db : da);
  }
  return out;
}

Array lift_rank(const Array& x, int64_t rank, CallSite site) {
  if (x.rank() == rank || x.rank() == 0) return x;  // primitives broadcast rank-0 operands
  Shape lifted;
  for (int64_t i = x.rank(); i < rank; ++i) lifted.dims().push_back(1);
  for (int64_t dim : x.shape().dims()) lifted.dims().push_back(dim);
  return reshape(x, lifted, site);
}

Array slice_axis(const Array& x, int64_t axis, int64_t start, int64_t limit, CallSite site) {
  Dims starts, limits;
  for (int64_t i = 0; i < x.rank(); ++i) {
    starts.push_back(i == axis ? start : 0);
    limits.push_back(i == axis ? limit : x.shape()[i]);
  }
  return slice(x, starts, limits, {}, site);
}

void require_defined(std::string_view op, const Array& x, CallSite site) {
  if (!x.defined()) fail(site, fmt::format("{}: the operand is an empty Array", op));
}

void require_index_operands(std::string_view op, const Array& x, const Array& indices,
                            CallSite site) {
  if (!x.defined() || !indices.defined()) {
    fail(site, fmt::format("{}: an operand is an empty Array (default-constructed)", op));
  }
  if (!is_integer(indices.dtype())) {
    fail(site,
         fmt::format("{}: indices must have an integer dtype, got {}", op,
                     indices.aval().to_string()),
         "convert them first, e.g. astype(indices, DType::i32)");
  }
}

Array bind_binary(PrimId id, std::string_view op, const Array& a, const Array& b, CallSite site) {
  if (!a.defined() || !b.defined()) {
    fail(site, fmt::format("{}: an operand is an empty Array (default-constructed)", op));
  }
  Shape out = broadcast_shapes(op, a.aval(), b.aval(), site);
  auto [pa, pb] = promote_operands(a, b, site);
  return bind1(id, {lift_rank(pa, out.rank(), site), lift_rank(pb, out.rank(), site)}, NoParams{},
               site);
}

int64_t user_axis(std::string_view op, int64_t axis, int64_t rank, CallSite site) {
  if (axis < -rank || axis >= rank) {
    fail(site, fmt::format("{}: axis {} is out of range for an array of rank {}", op, axis, rank),
         rank == 0 ? "a rank-0 (scalar) array has no axes"
                   : fmt::format("valid axes are {}..{}", -rank, rank - 1));
  }
  return axis < 0 ? axis + rank : axis;
}

Dims user_axes(std::string_view op, const Dims& axes, int64_t rank, CallSite site) {
  Dims out;
  if (axes.empty()) {
    for (int64_t axis = 0; axis < rank; ++axis) out.push_back(axis);
    return out;
  }
  for (int64_t axis : axes) out.push_back(user_axis(op, axis, rank, site));
  std::sort(out.begin(), out.end());
  for (size_t i = 1; i < out.size(); ++i) {
    if (out[i] == out[i - 1]) {
      fail(site,
           fmt::format("{}: axis {} is listed twice in {}", op, out[i], dims_to_string(axes)));
    }
  }
  return out;
}

}  // namespace kiln
