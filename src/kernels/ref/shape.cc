// Reference kernels of the layout family. Each walks every output (or operand) element by
// its multi-index and copies it byte-wise from the element the primitive's definition
// names: slow, but obviously right. The fast kernels (kernels/cpu/shape*.cc) are tested
// against these.
#include <algorithm>
#include <cstring>

#include "base/check.h"
#include "core/element_convert.h"
#include "kernels/ref/ref_kernels.h"
#include "prims/ids/shape.h"

namespace kiln {
namespace {

// Calls fn(index) for every multi-index of `shape` in row-major order.
template <typename Fn>
void for_each_index(const Shape& shape, Fn&& fn) {
  if (shape.num_elements() == 0) return;
  Dims index(static_cast<size_t>(shape.rank()), 0);
  while (true) {
    fn(index);
    int64_t axis = shape.rank() - 1;
    for (; axis >= 0; --axis) {
      if (++index[static_cast<size_t>(axis)] < shape[axis]) break;
      index[static_cast<size_t>(axis)] = 0;
    }
    if (axis < 0) return;
  }
}

int64_t offset_of(const Dims& index, const Dims& strides) {
  int64_t offset = 0;
  for (size_t axis = 0; axis < index.size(); ++axis) offset += index[axis] * strides[axis];
  return offset;
}

// Copies element `from` of `in` to element `to` of `out`; elements are `width` bytes.
void copy_element(void* out, int64_t to, const void* in, int64_t from, int64_t width) {
  std::memcpy(static_cast<std::byte*>(out) + to * width,
              static_cast<const std::byte*>(in) + from * width, static_cast<size_t>(width));
}

int64_t width_of(const KernelCall& call) {
  return dtype_size(call.outputs[0].aval->dtype);
}

void ref_broadcast_in_dim(const KernelCall& call) {
  const auto& p = std::get<BroadcastInDimParams>(call.params);
  const Shape& in_shape = call.inputs[0].aval->shape;
  Dims in_strides = in_shape.strides();
  Dims in_index(static_cast<size_t>(in_shape.rank()), 0);
  int64_t i = 0;
  for_each_index(p.shape, [&](const Dims& out_index) {
    for (size_t k = 0; k < in_index.size(); ++k) {
      in_index[k] =
          in_shape[static_cast<int64_t>(k)] == 1 ? 0 : out_index[p.broadcast_dimensions[k]];
    }
    copy_element(call.outputs[0].data, i++, call.inputs[0].data, offset_of(in_index, in_strides),
                 width_of(call));
  });
}

// Row-major data is unchanged by a reshape; eager mode shares the buffer instead of
// calling this, but compiled programs (and the tests) use it.
void ref_reshape(const KernelCall& call) {
  size_t bytes = static_cast<size_t>(call.outputs[0].aval->size_bytes());
  if (bytes > 0) std::memcpy(call.outputs[0].data, call.inputs[0].data, bytes);
}

void ref_transpose(const KernelCall& call) {
  const Dims& permutation = std::get<TransposeParams>(call.params).permutation;
  Dims in_strides = call.inputs[0].aval->shape.strides();
  Dims in_index(permutation.size(), 0);
  int64_t i = 0;
  for_each_index(call.outputs[0].aval->shape, [&](const Dims& out_index) {
    for (size_t k = 0; k < permutation.size(); ++k) in_index[permutation[k]] = out_index[k];
    copy_element(call.outputs[0].data, i++, call.inputs[0].data, offset_of(in_index, in_strides),
                 width_of(call));
  });
}

void ref_slice(const KernelCall& call) {
  const auto& p = std::get<SliceParams>(call.params);
  Dims in_strides = call.inputs[0].aval->shape.strides();
  Dims in_index(p.start_indices.size(), 0);
  int64_t i = 0;
  for_each_index(call.outputs[0].aval->shape, [&](const Dims& out_index) {
    for (size_t k = 0; k < in_index.size(); ++k) {
      int64_t stride = p.strides.empty() ? 1 : p.strides[k];
      in_index[k] = p.start_indices[k] + out_index[k] * stride;
    }
    copy_element(call.outputs[0].data, i++, call.inputs[0].data, offset_of(in_index, in_strides),
                 width_of(call));
  });
}

// The start indices of a dynamic slice of `window` in `shape`, each clamped to
// [0, shape - window] as XLA does.
Dims clamped_starts(const KernelInput& starts, const Shape& shape, const Shape& window) {
  Dims clamped;
  visit_dtype(starts.aval->dtype, [&](auto tag) {
    using S = storage_t<decltype(tag)::value>;
    if constexpr (std::is_integral_v<S> && !std::is_same_v<S, bool>) {
      const S* values = static_cast<const S*>(starts.data);
      for (int64_t axis = 0; axis < shape.rank(); ++axis) {
        auto start = static_cast<int64_t>(values[axis]);
        clamped.push_back(std::clamp<int64_t>(start, 0, shape[axis] - window[axis]));
      }
    } else {
      KILN_CHECK(false, "start indices of dtype {}", dtype_name(starts.aval->dtype));
    }
  });
  return clamped;
}

void ref_dynamic_slice(const KernelCall& call) {
  const Shape& in_shape = call.inputs[0].aval->shape;
  const Shape& out_shape = call.outputs[0].aval->shape;
  Dims starts = clamped_starts(call.inputs[1], in_shape, out_shape);
  Dims in_strides = in_shape.strides();
  Dims in_index(starts.size(), 0);
  int64_t i = 0;
  for_each_index(out_shape, [&](const Dims& out_index) {
    for (size_t k = 0; k < in_index.size(); ++k) in_index[k] = starts[k] + out_index[k];
    copy_element(call.outputs[0].data, i++, call.inputs[0].data, offset_of(in_index, in_strides),
                 width_of(call));
  });
}

void ref_dynamic_update_slice(const KernelCall& call) {
  const Shape& out_shape = call.outputs[0].aval->shape;
  const Shape& update_shape = call.inputs[1].aval->shape;
  int64_t width = width_of(call);
  for (int64_t i = 0; i < out_shape.num_elements(); ++i) {
    copy_element(call.outputs[0].data, i, call.inputs[0].data, i, width);
  }
  Dims starts = clamped_starts(call.inputs[2], out_shape, update_shape);
  Dims out_strides = out_shape.strides();
  Dims out_index(starts.size(), 0);
  int64_t i = 0;
  for_each_index(update_shape, [&](const Dims& update_index) {
    for (size_t k = 0; k < out_index.size(); ++k) out_index[k] = starts[k] + update_index[k];
    copy_element(call.outputs[0].data, offset_of(out_index, out_strides), call.inputs[1].data, i++,
                 width);
  });
}

void ref_concatenate(const KernelCall& call) {
  auto dimension = static_cast<size_t>(std::get<ConcatenateParams>(call.params).dimension);
  Dims out_strides = call.outputs[0].aval->shape.strides();
  int64_t offset = 0;  // where the current operand starts along `dimension`
  for (const KernelInput& input : call.inputs) {
    int64_t i = 0;
    for_each_index(input.aval->shape, [&](const Dims& in_index) {
      Dims out_index = in_index;
      out_index[dimension] += offset;
      copy_element(call.outputs[0].data, offset_of(out_index, out_strides), input.data, i++,
                   width_of(call));
    });
    offset += input.aval->shape[static_cast<int64_t>(dimension)];
  }
}

void ref_pad(const KernelCall& call) {
  const auto& p = std::get<PadParams>(call.params);
  const Shape& out_shape = call.outputs[0].aval->shape;
  int64_t width = width_of(call);
  for (int64_t i = 0; i < out_shape.num_elements(); ++i) {
    copy_element(call.outputs[0].data, i, call.inputs[1].data, 0, width);
  }
  Dims out_strides = out_shape.strides();
  Dims out_index(p.low.size(), 0);
  int64_t i = 0;
  for_each_index(call.inputs[0].aval->shape, [&](const Dims& in_index) {
    bool inside = true;
    for (size_t k = 0; k < out_index.size(); ++k) {
      // In 128 bits: legal params can be huge (a large interior on a size-1 axis).
      __int128 position =
          p.low[k] + static_cast<__int128>(in_index[k]) * (p.interior[k] + __int128{1});
      inside = inside && position >= 0 && position < out_shape[static_cast<int64_t>(k)];
      out_index[k] = inside ? static_cast<int64_t>(position) : 0;
    }
    // Elements that negative low/high crop away are skipped.
    if (inside) {
      copy_element(call.outputs[0].data, offset_of(out_index, out_strides), call.inputs[0].data, i,
                   width);
    }
    ++i;
  });
}

void ref_iota(const KernelCall& call) {
  const auto& p = std::get<IotaParams>(call.params);
  visit_dtype(p.dtype, [&](auto tag) {
    using S = storage_t<decltype(tag)::value>;
    S* out = static_cast<S*>(call.outputs[0].data);
    int64_t i = 0;
    for_each_index(p.shape, [&](const Dims& index) {
      // Integers wrap (as convert_element_type does); floats round to nearest.
      out[i++] = convert_element<S>(index[static_cast<size_t>(p.dimension)]);
    });
  });
}

}  // namespace

void register_ref_shape(PrimTable& table) {
  table[prim::broadcast_in_dim].ref_kernel = ref_broadcast_in_dim;
  table[prim::reshape].ref_kernel = ref_reshape;
  table[prim::stop_gradient].ref_kernel = ref_reshape;  // a plain copy as well
  table[prim::transpose].ref_kernel = ref_transpose;
  table[prim::slice].ref_kernel = ref_slice;
  table[prim::dynamic_slice].ref_kernel = ref_dynamic_slice;
  table[prim::dynamic_update_slice].ref_kernel = ref_dynamic_update_slice;
  table[prim::concatenate].ref_kernel = ref_concatenate;
  table[prim::pad].ref_kernel = ref_pad;
  table[prim::iota].ref_kernel = ref_iota;
}

}  // namespace kiln
