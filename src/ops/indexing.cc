// User-facing indexing ops: take, take_along_axis and one_hot (the functional indexed update
// x.at(i) is in indexed_update.cc). They check what the user passed (naming the op) and
// bind gather. Index values are checked when the kernel runs: in mode
// error an out-of-range index fails the next synchronization with this op's call site.
#include <algorithm>

#include <fmt/format.h>

#include "kiln/array_functions.h"
#include "ops/op_util.h"
#include "prims/ids/index.h"

namespace kiln {
namespace {

// numpy's take_along_axis: indices of x's rank, the other axes broadcasting against x's.
Array take_along_axis_same_rank(const Array& x, const Array& indices, int64_t axis, CallSite site) {
  Shape x_shape = x.shape(), index_shape = indices.shape();
  for (int64_t d = 0; d < x.rank(); ++d) {
    if (d == axis) continue;
    int64_t a = x_shape[d], b = index_shape[d];
    if (a != b && a != 1 && b != 1) {
      fail(site, fmt::format("take_along_axis: indices {} do not broadcast against x {} in axis {} "
                             "(every axis but {} must be equal or 1)",
                             indices.aval().to_string(), x.aval().to_string(), d, axis));
    }
    x_shape[d] = index_shape[d] = std::max(a, b);
  }
  Array values = x_shape == x.shape() ? x : broadcast_to(x, x_shape, site);
  Array picks = index_shape == indices.shape() ? indices : broadcast_to(indices, index_shape, site);
  int64_t last = x.rank() - 1;
  if (axis != last) {
    values = moveaxis(values, axis, last, site);
    picks = moveaxis(picks, axis, last, site);
  }
  Array out =
      bind1(prim::gather, {values, picks}, GatherParams{last, last, IndexMode::kError}, site);
  return axis == last ? out : moveaxis(out, last, axis, site);
}

}  // namespace

Array take(const Array& x, const Array& indices, int64_t axis, std::optional<IndexMode> mode,
           CallSite site) {
  require_index_operands("take", x, indices, site);
  if (x.rank() == 0) {
    fail(site, fmt::format("take: cannot index a rank-0 array {}", x.aval().to_string()),
         "reshape it to rank 1 first, e.g. x.reshape({1})");
  }
  int64_t normalised = user_axis("take", axis, x.rank(), site);
  return bind1(prim::gather, {x, indices},
               GatherParams{normalised, 0, mode.value_or(IndexMode::kError)}, site);
}

// Gather with every axis but `axis` as a batch axis: after moving `axis` last, the indices
// (x's shape without `axis`) line up with x's leading axes.
Array take_along_axis(const Array& x, const Array& indices, int64_t axis, CallSite site) {
  require_index_operands("take_along_axis", x, indices, site);
  if (x.rank() == 0) {
    fail(site,
         fmt::format("take_along_axis: cannot index a rank-0 array {}", x.aval().to_string()));
  }
  int64_t normalised = user_axis("take_along_axis", axis, x.rank(), site);
  if (indices.rank() == x.rank()) return take_along_axis_same_rank(x, indices, normalised, site);
  Shape expected;
  for (int64_t d = 0; d < x.rank(); ++d) {
    if (d != normalised) expected.dims().push_back(x.shape()[d]);
  }
  if (indices.shape() != expected) {
    fail(site,
         fmt::format("take_along_axis: indices {} must have the rank of x {} (NumPy's form) or "
                     "its shape without axis {}, i.e. {}",
                     indices.aval().to_string(), x.aval().to_string(), axis, expected.to_string()),
         "pass one index per position of the other axes, e.g. labels of shape [batch] for "
         "logits of shape [batch, classes] and axis -1");
  }
  int64_t last = x.rank() - 1;
  Array moved = normalised == last ? x : moveaxis(x, normalised, last, site);
  return bind1(prim::gather, {moved, indices}, GatherParams{last, last, IndexMode::kError}, site);
}

// Labels outside [0, num_classes) (negative ones included) give an all-zero row, as in
// jax.nn.one_hot: one_hot([2, -1, 5], 3) is [[0,0,1], [0,0,0], [0,0,0]].
Array one_hot(const Array& labels, int64_t num_classes, DType dtype, CallSite site) {
  if (!labels.defined()) fail(site, "one_hot: labels is an empty Array (default-constructed)");
  if (!is_integer(labels.dtype())) {
    fail(site,
         fmt::format("one_hot: labels must have an integer dtype, got {}",
                     labels.aval().to_string()),
         "convert them first, e.g. astype(labels, DType::i32)");
  }
  if (num_classes <= 0) {
    fail(site, fmt::format("one_hot: num_classes must be positive, got {}", num_classes));
  }
  // Compare each label with the class numbers; i64 classes hold any label dtype's values.
  Array class_row = iota(Shape{num_classes}, DType::i64, 0, device_of(labels), site);
  Shape column = labels.shape();
  column.dims().push_back(1);
  return astype(equal(reshape(labels, column, site), class_row, site), dtype, site);
}

}  // namespace kiln
