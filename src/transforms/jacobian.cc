// Jacobians (see include/kiln/jacobian.h): one JVP per input element, or one VJP per
// output element, batched with vmap over the rows of an identity matrix, as JAX does.
#include "kiln/jacobian.h"

#include <fmt/format.h>

#include "kiln/array_functions.h"
#include "kiln/grad.h"
#include "kiln/jvp.h"
#include "kiln/ops.h"
#include "kiln/vmap.h"

namespace kiln::detail {
namespace {

// The rows of the identity matrix of size `shape`'s element count, each shaped like
// `shape`: a batch of basis directions, [n, *shape].
Array basis_of(const Shape& shape, DType dtype, CallSite site) {
  int64_t n = shape.num_elements();
  Array rows = iota(Shape{n, n}, DType::i32, 0, nullptr, site);
  Array columns = iota(Shape{n, n}, DType::i32, 1, nullptr, site);
  std::vector<int64_t> dims{n};
  for (int64_t d : shape.dims()) dims.push_back(d);
  return reshape(astype(equal(rows, columns, site), dtype, site), Shape(dims), site);
}

// `result` of shape [n, *leading] made [*leading, *trailing] where trailing has n elements.
Array batch_last(const Array& stacked, const Shape& leading, const Shape& trailing, CallSite site) {
  std::vector<int64_t> dims(leading.dims().begin(), leading.dims().end());
  for (int64_t d : trailing.dims()) dims.push_back(d);
  Array moved = stacked.rank() == 0 ? stacked : moveaxis(stacked, 0, stacked.rank() - 1, site);
  return reshape(moved, Shape(dims), site);
}

Shape joined(const Shape& a, const Shape& b) {
  std::vector<int64_t> dims(a.dims().begin(), a.dims().end());
  for (int64_t d : b.dims()) dims.push_back(d);
  return Shape(dims);
}

}  // namespace

Array jacobian_flat(const FlatFunction& fn, std::span<const Array> inputs, size_t leaf,
                    bool forward, CallSite site) {
  std::string_view what = forward ? "jacfwd" : "jacrev";
  const Array& x = inputs[leaf];
  check_differentiable_leaves(std::span<const Array>(&x, 1), what, site);
  std::vector<std::string> names{"basis"};
  std::vector<std::optional<int64_t>> axes{0};
  if (forward) {
    FlatLinearized lin = linearize_flat(fn, inputs, site);
    if (lin.outputs.size() != 1) {
      fail(site, fmt::format("{}: the function must return one Array", what));
    }
    const Array& y = lin.outputs[0];
    Shape shape = joined(y.shape(), x.shape());
    if (!is_floating(y.dtype())) {
      fail(site, fmt::format("{}: the function's result is {}, not floating point", what,
                             y.aval().to_string()));
    }
    int64_t n = x.size();
    if (n == 0 || y.size() == 0) return zeros(shape, y.dtype(), nullptr, site);
    FlatFunction column = [&](std::span<const Array> t) {
      std::vector<Array> tangents(inputs.size());
      tangents[leaf] = t[0];
      return with_zero_tangents(lin.push_forward(tangents), lin.outputs, site);
    };
    Array basis = basis_of(x.shape(), x.dtype(), site);
    BatchedOutputs columns =
        vmap_flat(column, std::span<const Array>(&basis, 1), axes, names, site);
    Array stacked =
        place_batch_axis(columns.values[0], columns.dims[0], 0, n, "the Jacobian", site);
    return batch_last(stacked, y.shape(), x.shape(), site);
  }
  std::vector<bool> differentiable(inputs.size(), false);
  differentiable[leaf] = true;
  FlatVjp vjp = vjp_flat(fn, inputs, differentiable, site);
  if (vjp.outputs.size() != 1)
    fail(site, fmt::format("{}: the function must return one Array", what));
  const Array& y = vjp.outputs[0];
  if (!is_floating(y.dtype())) {
    fail(site, fmt::format("{}: the function's result is {}, not floating point", what,
                           y.aval().to_string()));
  }
  Shape shape = joined(y.shape(), x.shape());
  int64_t m = y.size();
  if (m == 0 || x.size() == 0) return zeros(shape, y.dtype(), nullptr, site);
  FlatFunction row = [&](std::span<const Array> u) {
    std::vector<Array> cotangents{u[0]};
    return std::vector<Array>{vjp.pullback(cotangents)[leaf]};
  };
  Array basis = basis_of(y.shape(), y.dtype(), site);
  BatchedOutputs rows = vmap_flat(row, std::span<const Array>(&basis, 1), axes, names, site);
  Array stacked = place_batch_axis(rows.values[0], rows.dims[0], 0, m, "the Jacobian", site);
  return reshape(stacked, shape, site);
}

}  // namespace kiln::detail
