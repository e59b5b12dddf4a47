// The functional indexed update x.at(...).set / add / mul / min / max (kiln/array.h), as
// JAX's x.at[...]. One index array on axis 0 with set or add binds scatter / scatter_add
// directly; every other form (another axis, several index arrays, mul, min, max) goes
// through lax::scatter* (kiln/gather_scatter.h) with the dimension numbers of
// x.at[i0, i1, ...]: the index arrays stacked along a last axis start the leading axes,
// the rest of x is the window.
#include <algorithm>

#include <fmt/format.h>

#include "kiln/array_functions.h"
#include "kiln/device.h"
#include "kiln/gather_scatter.h"
#include "ops/op_util.h"
#include "prims/ids/index.h"

namespace kiln {
namespace {

// The shape the index arrays broadcast to (numpy's rules), or an error naming them.
Shape broadcast_indices(const std::vector<Array>& indices, CallSite site) {
  int64_t rank = 0;
  for (const Array& index : indices) rank = std::max(rank, index.rank());
  Dims dims(static_cast<size_t>(rank), 1);
  for (const Array& index : indices) {
    for (int64_t i = 1; i <= index.rank(); ++i) {
      int64_t have = index.shape()[index.rank() - i];
      int64_t& want = dims[static_cast<size_t>(rank - i)];
      if (have == want || have == 1) continue;
      if (want != 1) {
        std::string shapes;
        for (const Array& each : indices) {
          shapes += (shapes.empty() ? "" : ", ") + each.aval().to_string();
        }
        fail(site, fmt::format("at: the index arrays {} do not broadcast together", shapes),
             "x.at({i, j}) pairs the index arrays element by element, as x.at[i, j]");
      }
      want = have;
    }
  }
  return Shape(dims);
}

// `values` converted to x's dtype and broadcast to exactly `target`, the shape of
// x[indices], with an error naming `op` when they do not broadcast to it.
Array update_values(std::string_view op, const Array& x, const std::string& indices_text,
                    const Shape& target, const Array& values, CallSite site) {
  if (!values.defined()) fail(site, fmt::format("{}: values is an empty Array", op));
  // Numpy broadcasting: align from the right, each axis equal or 1, no extra leading axes.
  bool fits = values.rank() <= target.rank();
  for (int64_t i = 1; fits && i <= values.rank(); ++i) {
    int64_t have = values.shape()[values.rank() - i];
    fits = have == 1 || have == target[target.rank() - i];
  }
  if (!fits) {
    fail(site,
         fmt::format("{}: values {} do not broadcast to {}, the shape of x[indices] for x {} "
                     "and indices {}",
                     op, values.aval().to_string(), target.to_string(), x.aval().to_string(),
                     indices_text),
         "values must broadcast to the shape of x[indices]: the indices' shape in place of "
         "the indexed axes");
  }
  Array converted = values.dtype() == x.dtype() ? values : astype(values, x.dtype(), site);
  return converted.shape() == target ? converted : broadcast_to(converted, target, site);
}

}  // namespace

Array::IndexedUpdate Array::at(const Array& indices, CallSite site) const {
  return at(indices, 0, site);
}

Array::IndexedUpdate Array::at(const Array& indices, int64_t axis, CallSite site) const {
  require_index_operands("at", *this, indices, site);
  if (rank() == 0) {
    fail(site, fmt::format("at: cannot index a rank-0 array {}", aval().to_string()),
         "at() indexes an axis; reshape the array to rank 1 first");
  }
  int64_t normalised = user_axis("at", axis, rank(), site);
  return IndexedUpdate(*this, {indices}, normalised, site);
}

Array::IndexedUpdate Array::at(std::vector<Array> indices, CallSite site) const {
  if (indices.empty()) fail(site, "at: give at least one index array");
  for (const Array& index : indices) require_index_operands("at", *this, index, site);
  if (static_cast<int64_t>(indices.size()) > rank()) {
    fail(site,
         fmt::format("at: {} index arrays for an array {} of rank {}", indices.size(),
                     aval().to_string(), rank()),
         "one index array per leading axis at most");
  }
  broadcast_indices(indices, site);  // fails here, at the call that names the indices
  return IndexedUpdate(*this, std::move(indices), 0, site);
}

Array Array::IndexedUpdate::update(Kind kind, const Array& values) const {
  static constexpr std::string_view kNames[] = {"at.set", "at.add", "at.mul", "at.min", "at.max"};
  std::string_view op = kNames[static_cast<int>(kind)];
  CallSite site = site_;
  const Array& x = array_;
  if (x.dtype() == DType::bool_ && (kind == Kind::kAdd || kind == Kind::kMul)) {
    fail(site,
         fmt::format("{}: cannot {} a bool array {}", op,
                     kind == Kind::kAdd ? "add to" : "multiply", x.aval().to_string()),
         "convert it first, e.g. x.astype(DType::i32), or use .set()");
  }
  if (indices_.size() == 1 && axis_ == 0 && (kind == Kind::kSet || kind == Kind::kAdd)) {
    const Array& indices = indices_[0];
    Shape target = indices.shape();
    for (int64_t d = 1; d < x.rank(); ++d) target.dims().push_back(x.shape()[d]);
    Array updates = update_values(op, x, indices.aval().to_string(), target, values, site);
    return bind1(kind == Kind::kSet ? prim::scatter : prim::scatter_add, {x, indices, updates},
                 ScatterParams{0, 0, IndexMode::kError}, site);
  }
  // Another axis: move it first, update, move it back; the values move the same way.
  if (indices_.size() == 1 && axis_ != 0) {
    const Array& indices = indices_[0];
    int64_t axis = axis_, r = indices.rank();
    Dims target;  // numpy's shape of x[:, ..., indices, ...]
    for (int64_t d = 0; d < axis; ++d) target.push_back(x.shape()[d]);
    for (int64_t d = 0; d < r; ++d) target.push_back(indices.shape()[d]);
    for (int64_t d = axis + 1; d < x.rank(); ++d) target.push_back(x.shape()[d]);
    Array updates = update_values(op, x, indices.aval().to_string(), Shape(target), values, site);
    Dims to_front;  // the indices' axes first, then the others in order
    for (int64_t d = 0; d < r; ++d) to_front.push_back(axis + d);
    for (int64_t d = 0; d < axis; ++d) to_front.push_back(d);
    for (int64_t d = axis + r; d < static_cast<int64_t>(target.size()); ++d) to_front.push_back(d);
    Array moved = moveaxis(x, axis, 0, site);
    Array front = kiln::transpose(updates, to_front, site);
    IndexedUpdate on_front(moved, indices_, 0, site);
    return moveaxis(on_front.update(kind, front), 0, axis, site);
  }
  // Leading axes from one or several index arrays, through lax::scatter*.
  auto k = static_cast<int64_t>(indices_.size());
  Shape batch = broadcast_indices(indices_, site);
  std::vector<Array> columns;
  std::string indices_text;
  for (const Array& index : indices_) {
    Array wide = index.shape() == batch ? index : broadcast_to(index, batch, site);
    columns.push_back(kiln::astype(wide, DType::i64, site));
    indices_text += (indices_text.empty() ? "" : ", ") + index.aval().to_string();
  }
  Array stacked = stack(columns, batch.rank(), site);
  Dims target = batch.dims();
  for (int64_t d = k; d < x.rank(); ++d) target.push_back(x.shape()[d]);
  Array updates = update_values(op, x, indices_text, Shape(target), values, site);
  lax::ScatterDimensionNumbers numbers;
  for (int64_t d = 0; d < k; ++d) {
    numbers.inserted_window_dims.push_back(d);
    numbers.scatter_dims_to_operand_dims.push_back(d);
  }
  for (int64_t d = 0; d < x.rank() - k; ++d) numbers.update_window_dims.push_back(batch.rank() + d);
  switch (kind) {
    case Kind::kSet:
      return lax::scatter(x, stacked, updates, numbers, IndexMode::kError, site);
    case Kind::kAdd:
      return lax::scatter_add(x, stacked, updates, numbers, IndexMode::kError, site);
    case Kind::kMul:
      return lax::scatter_mul(x, stacked, updates, numbers, IndexMode::kError, site);
    case Kind::kMin:
      return lax::scatter_min(x, stacked, updates, numbers, IndexMode::kError, site);
    case Kind::kMax:
      return lax::scatter_max(x, stacked, updates, numbers, IndexMode::kError, site);
  }
  return x;
}

Array Array::IndexedUpdate::update(Kind kind, double value) const {
  return update(kind, scalar(value, array_.dtype(), device_of(array_), site_));
}

Array Array::IndexedUpdate::set(const Array& values) const {
  return update(Kind::kSet, values);
}
Array Array::IndexedUpdate::add(const Array& values) const {
  return update(Kind::kAdd, values);
}
Array Array::IndexedUpdate::mul(const Array& values) const {
  return update(Kind::kMul, values);
}
Array Array::IndexedUpdate::min(const Array& values) const {
  return update(Kind::kMin, values);
}
Array Array::IndexedUpdate::max(const Array& values) const {
  return update(Kind::kMax, values);
}
Array Array::IndexedUpdate::set(double value) const {
  return update(Kind::kSet, value);
}
Array Array::IndexedUpdate::add(double value) const {
  return update(Kind::kAdd, value);
}
Array Array::IndexedUpdate::mul(double value) const {
  return update(Kind::kMul, value);
}
Array Array::IndexedUpdate::min(double value) const {
  return update(Kind::kMin, value);
}
Array Array::IndexedUpdate::max(double value) const {
  return update(Kind::kMax, value);
}

}  // namespace kiln
