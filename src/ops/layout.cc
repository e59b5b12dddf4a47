// User-facing layout ops: reshape, transpose, broadcasting, expand_dims/squeeze, slicing,
// concatenation, stacking and pad. They accept numpy conventions (negative axes, inferred
// sizes), check their arguments with errors naming the op, skip the primitive when it
// would be a no-op, and bind the layout primitives with normalised params.
#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ops/op_util.h"
#include "prims/ids/shape.h"

namespace kiln {
namespace {

void check_defined(std::string_view op, const Array& x, CallSite site) {
  if (!x.defined()) {
    fail(site, fmt::format("{}: an operand is an empty Array (default-constructed)", op),
         "initialise the Array from an op or from_host before using it");
  }
}

std::string types_of(std::span<const Array> arrays) {
  std::vector<std::string> names;
  for (const Array& array : arrays) names.push_back(array.aval().to_string());
  return fmt::format("{}", fmt::join(names, ", "));
}

bool is_identity(const Dims& permutation) {
  for (size_t i = 0; i < permutation.size(); ++i) {
    if (permutation[i] != static_cast<int64_t>(i)) return false;
  }
  return true;
}

}  // namespace

Array reshape(const Array& x, Shape shape, CallSite site) {
  check_defined("reshape", x, site);
  int64_t inferred = -1;
  int64_t known = 1;
  for (int64_t axis = 0; axis < shape.rank(); ++axis) {
    if (shape[axis] == -1) {
      if (inferred >= 0) {
        fail(site, fmt::format("reshape: only one size may be -1, got {}", shape.to_string()),
             "give the other sizes explicitly");
      }
      inferred = axis;
    } else if (shape[axis] < 0) {
      fail(site, fmt::format("reshape: size {} in {} is negative", shape[axis], shape.to_string()),
           "sizes are >= 0; use -1 for one inferred size");
    } else if (__builtin_mul_overflow(known, shape[axis], &known)) {
      fail(site,
           fmt::format("reshape: {} has more elements than an int64 can count", shape.to_string()));
    }
  }
  if (inferred >= 0) {
    if (known == 0 || x.size() % known != 0) {
      fail(site,
           fmt::format("reshape: cannot infer the -1 in {} for {} ({} elements)", shape.to_string(),
                       x.aval().to_string(), x.size()),
           "the known sizes must divide the number of elements (and not be 0)");
    }
    shape[inferred] = x.size() / known;
  }
  if (shape.num_elements() != x.size()) {
    fail(site,
         fmt::format("reshape: cannot reshape {} ({} elements) to {} ({} elements)",
                     x.aval().to_string(), x.size(), shape.to_string(), shape.num_elements()),
         "the new shape must hold the same number of elements; use -1 for one inferred size");
  }
  if (shape == x.shape()) return x;
  return bind1(prim::reshape, {x}, ReshapeParams{shape}, site);
}

Array transpose(const Array& x, Dims permutation, CallSite site) {
  check_defined("transpose", x, site);
  int64_t rank = x.rank();
  if (permutation.empty()) {
    for (int64_t axis = rank - 1; axis >= 0; --axis) permutation.push_back(axis);
  }
  if (static_cast<int64_t>(permutation.size()) != rank) {
    fail(site,
         fmt::format("transpose: permutation {} has {} entries but {} has rank {}",
                     dims_to_string(permutation), permutation.size(), x.aval().to_string(), rank),
         "list every axis once, e.g. {1, 0} for a matrix; an empty permutation reverses the "
         "axes");
  }
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  Dims normalized;
  for (int64_t axis : permutation) {
    int64_t a = user_axis("transpose", axis, rank, site);
    if (seen[static_cast<size_t>(a)]) {
      fail(site,
           fmt::format("transpose: permutation {} lists axis {} twice for {}",
                       dims_to_string(permutation), a, x.aval().to_string()),
           "list every axis exactly once");
    }
    seen[static_cast<size_t>(a)] = true;
    normalized.push_back(a);
  }
  if (is_identity(normalized)) return x;
  return bind1(prim::transpose, {x}, TransposeParams{normalized}, site);
}

Array broadcast_to(const Array& x, Shape shape, CallSite site) {
  check_defined("broadcast_to", x, site);
  for (int64_t dim : shape.dims()) {
    if (dim < 0) {
      fail(site, fmt::format("broadcast_to: shape {} has a negative size", shape.to_string()));
    }
  }
  int64_t offset = shape.rank() - x.rank();
  const char* hint =
      "numpy broadcasting aligns shapes from the right; each axis of the array must be 1 or "
      "equal the target's. Use reshape or expand_dims to line the axes up";
  if (offset < 0) {
    fail(site,
         fmt::format("broadcast_to: cannot broadcast {} to the lower-rank shape {}",
                     x.aval().to_string(), shape.to_string()),
         hint);
  }
  Dims dims;
  for (int64_t axis = 0; axis < x.rank(); ++axis) {
    int64_t from = x.shape()[axis], to = shape[axis + offset];
    if (from != 1 && from != to) {
      fail(site,
           fmt::format("broadcast_to: cannot broadcast {} to {} (axis {}: {} vs {})",
                       x.aval().to_string(), shape.to_string(), axis - x.rank(), from, to),
           hint);
    }
    dims.push_back(axis + offset);
  }
  if (shape == x.shape()) return x;
  return bind1(prim::broadcast_in_dim, {x}, BroadcastInDimParams{shape, dims}, site);
}

Array broadcast_in_dim(const Array& x, Shape shape, Dims broadcast_dimensions, CallSite site) {
  check_defined("broadcast_in_dim", x, site);
  if (shape == x.shape() && is_identity(broadcast_dimensions) &&
      static_cast<int64_t>(broadcast_dimensions.size()) == x.rank()) {
    return x;
  }
  return bind1(prim::broadcast_in_dim, {x},
               BroadcastInDimParams{std::move(shape), std::move(broadcast_dimensions)}, site);
}

Array expand_dims(const Array& x, int64_t axis, CallSite site) {
  check_defined("expand_dims", x, site);
  // Like numpy, the axis counts in the result, so -1 appends a new last axis.
  int64_t at = user_axis("expand_dims", axis, x.rank() + 1, site);
  Shape shape = x.shape();
  shape.dims().insert_at(static_cast<size_t>(at), 1);
  return reshape(x, shape, site);
}

Array squeeze(const Array& x, Dims axes, CallSite site) {
  check_defined("squeeze", x, site);
  Shape shape;
  if (axes.empty()) {
    for (int64_t dim : x.shape().dims()) {
      if (dim != 1) shape.dims().push_back(dim);
    }
  } else {
    Dims remove = user_axes("squeeze", axes, x.rank(), site);
    for (int64_t axis : remove) {
      if (x.shape()[axis] != 1) {
        fail(site,
             fmt::format("squeeze: axis {} of {} has size {}; only size-1 axes can be removed",
                         axis, x.aval().to_string(), x.shape()[axis]),
             "use reshape to merge axes, or slice to keep part of one");
      }
    }
    for (int64_t axis = 0; axis < x.rank(); ++axis) {
      if (!std::binary_search(remove.begin(), remove.end(), axis)) {
        shape.dims().push_back(x.shape()[axis]);
      }
    }
  }
  return reshape(x, shape, site);
}

Array slice(const Array& x, Dims start, Dims limit, Dims strides, CallSite site) {
  check_defined("slice", x, site);
  auto rank = static_cast<size_t>(x.rank());
  bool identity =
      start.size() == rank && limit.size() == rank && (strides.empty() || strides.size() == rank);
  for (size_t axis = 0; identity && axis < rank; ++axis) {
    identity = start[axis] == 0 && limit[axis] == x.shape()[static_cast<int64_t>(axis)] &&
               (strides.empty() || strides[axis] == 1);
  }
  if (identity) return x;
  return bind1(prim::slice, {x},
               SliceParams{std::move(start), std::move(limit), std::move(strides)}, site);
}

namespace {

// As jax.lax.dynamic_slice and dynamic_update_slice: a negative start counts from the end of
// its axis (start + size) before the primitive clamps the window into the array. (The
// primitive itself only clamps, as XLA's and JAX's primitives do.)
Array count_negative_starts_from_the_end(const Array& x, const Array& start, CallSite site) {
  if (!is_signed_integer(start.dtype())) return start;
  // The axis sizes as a constant of start's own dtype (i32 or i64), so that no conversion
  // joins the program.
  Shape rank{x.rank()};
  Array sizes;
  if (start.dtype() == DType::i32) {
    std::vector<int32_t> dims;
    for (int64_t d : x.shape().dims()) dims.push_back(static_cast<int32_t>(d));
    sizes = from_host(dims, rank, device_of(x), site);
  } else {
    std::vector<int64_t> dims(x.shape().dims().begin(), x.shape().dims().end());
    sizes = from_host(dims, rank, device_of(x), site);
  }
  Array negative = less(start, detail::weak_scalar_like(0, false, start, site), site);
  return where(negative, add(start, sizes, site), start, site);
}

}  // namespace

Array dynamic_slice(const Array& x, const Array& start, Dims sizes, CallSite site) {
  check_defined("dynamic_slice", x, site);
  check_defined("dynamic_slice", start, site);
  DynamicSliceParams params{std::move(sizes)};
  // A window as large as the array is clamped to start 0: the result is x itself.
  AbstractValue in_avals[] = {x.aval(), start.aval()};
  std::vector<AbstractValue> out = abstract_eval(prim::dynamic_slice, in_avals, params, site);
  if (out[0] == x.aval()) return x;
  return bind1(prim::dynamic_slice, {x, count_negative_starts_from_the_end(x, start, site)}, params,
               site);
}

Array dynamic_update_slice(const Array& x, const Array& update, const Array& start, CallSite site) {
  check_defined("dynamic_update_slice", x, site);
  check_defined("dynamic_update_slice", update, site);
  check_defined("dynamic_update_slice", start, site);
  AbstractValue in_avals[] = {x.aval(), update.aval(), start.aval()};
  std::vector<AbstractValue> out =
      abstract_eval(prim::dynamic_update_slice, in_avals, NoParams{}, site);
  // An empty update changes nothing; a full-size one (clamped to start 0) replaces all.
  if (update.size() == 0 && out[0] == x.aval()) return x;
  if (update.shape() == x.shape() && out[0] == update.aval()) return update;
  return bind1(prim::dynamic_update_slice,
               {x, update, count_negative_starts_from_the_end(x, start, site)}, NoParams{}, site);
}

Array concatenate(std::span<const Array> arrays, int64_t axis, CallSite site) {
  if (arrays.empty()) {
    fail(site, "concatenate: needs at least one array, got an empty list",
         "to make an empty array use zeros({0}) or similar");
  }
  for (const Array& array : arrays) check_defined("concatenate", array, site);
  const Array& first = arrays[0];
  if (first.rank() == 0) {
    fail(site, fmt::format("concatenate: cannot join rank-0 arrays ({})", types_of(arrays)),
         "use stack to join scalars into a vector");
  }
  int64_t dimension = user_axis("concatenate", axis, first.rank(), site);
  for (const Array& array : arrays) {
    if (array.dtype() != first.dtype()) {
      fail(site, fmt::format("concatenate: arrays must have one dtype, got {}", types_of(arrays)),
           "convert them to a common dtype with astype first");
    }
    bool compatible = array.rank() == first.rank();
    for (int64_t a = 0; compatible && a < first.rank(); ++a) {
      compatible = a == dimension || array.shape()[a] == first.shape()[a];
    }
    if (!compatible) {
      fail(site,
           fmt::format("concatenate: shapes {} must have equal rank and agree on every axis "
                       "except axis {}",
                       types_of(arrays), dimension),
           "only the sizes along the concatenation axis may differ");
    }
  }
  if (arrays.size() == 1) return first;
  return bind1(prim::concatenate, arrays, ConcatenateParams{dimension}, site);
}

Array concatenate(std::initializer_list<Array> arrays, int64_t axis, CallSite site) {
  return concatenate(std::span<const Array>(arrays.begin(), arrays.size()), axis, site);
}

Array stack(std::span<const Array> arrays, int64_t axis, CallSite site) {
  if (arrays.empty()) {
    fail(site, "stack: needs at least one array, got an empty list",
         "to make an empty array use zeros({0}) or similar");
  }
  for (const Array& array : arrays) check_defined("stack", array, site);
  const Array& first = arrays[0];
  for (const Array& array : arrays) {
    if (array.shape() != first.shape() || array.dtype() != first.dtype()) {
      fail(site,
           fmt::format("stack: arrays must have one shape and dtype, got {}", types_of(arrays)),
           "reshape or astype them first; to join along an existing axis use concatenate");
    }
  }
  // The new axis counts in the result, like numpy.stack.
  int64_t at = user_axis("stack", axis, first.rank() + 1, site);
  std::vector<Array> expanded;
  for (const Array& array : arrays) expanded.push_back(expand_dims(array, at, site));
  return concatenate(expanded, at, site);
}

Array stack(std::initializer_list<Array> arrays, int64_t axis, CallSite site) {
  return stack(std::span<const Array>(arrays.begin(), arrays.size()), axis, site);
}

Array pad(const Array& x, Dims low, Dims high, Dims interior, double value, CallSite site) {
  check_defined("pad", x, site);
  if (interior.empty()) interior = Dims(static_cast<size_t>(x.rank()), 0);
  auto rank = static_cast<size_t>(x.rank());
  bool identity = low.size() == rank && high.size() == rank && interior.size() == rank;
  for (size_t axis = 0; identity && axis < rank; ++axis) {
    identity = low[axis] == 0 && high[axis] == 0 && interior[axis] == 0;
  }
  if (identity) return x;
  Array padding = scalar(value, x.dtype(), device_of(x), site);
  return bind1(prim::pad, {x, padding},
               PadParams{std::move(low), std::move(high), std::move(interior)}, site);
}

}  // namespace kiln
