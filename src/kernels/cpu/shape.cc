// Fast CPU kernels of the layout family. Apart from transpose (shape_transpose.cc) each
// primitive is phrased as strided block copies (shape_copy.h), which merge axes and move
// contiguous runs with memcpy where the reference kernels copy element by element. They
// are copies, so their results are bit-identical to the reference kernels'.
#include <algorithm>

#include "base/check.h"
#include "core/element_convert.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/shape_copy.h"
#include "kernels/cpu/shape_kernels.h"
#include "prims/ids/shape.h"

namespace kiln {
namespace shape_kernels {
namespace {

int64_t width_of(const KernelCall& call) {
  return dtype_size(call.outputs[0].aval->dtype);
}

// The whole of `shape`, laid out row-major on both sides.
Block dense_block(const Shape& shape) {
  Dims strides = shape.strides();
  return Block{shape.dims(), strides, strides, 0, 0};
}

void cpu_broadcast_in_dim(const KernelCall& call) {
  const auto& p = std::get<BroadcastInDimParams>(call.params);
  const Shape& in_shape = call.inputs[0].aval->shape;
  Block block = dense_block(p.shape);
  // Output axes the operand does not vary along are read with stride 0.
  std::fill(block.src_strides.begin(), block.src_strides.end(), 0);
  Dims in_strides = in_shape.strides();
  for (size_t i = 0; i < p.broadcast_dimensions.size(); ++i) {
    if (in_shape[static_cast<int64_t>(i)] != 1) {
      block.src_strides[p.broadcast_dimensions[i]] = in_strides[i];
    }
  }
  block_copy(call.inputs[0].data, call.outputs[0].data, block, width_of(call), call.pool);
}

void cpu_reshape(const KernelCall& call) {
  parallel_memcpy(call.outputs[0].data, call.inputs[0].data, call.outputs[0].aval->size_bytes(),
                  call.pool);
}

// Copies the window of the operand starting at `starts` with `strides` into the output.
void copy_window(const KernelCall& call, const Dims& starts, const Dims& strides) {
  const Shape& in_shape = call.inputs[0].aval->shape;
  Block block = dense_block(call.outputs[0].aval->shape);
  Dims in_strides = in_shape.strides();
  for (size_t axis = 0; axis < in_strides.size(); ++axis) {
    // A stride only matters on axes with two or more results, where it is within the
    // operand; on others it may be any size and must not be multiplied.
    int64_t stride = strides.empty() || block.sizes[axis] < 2 ? 1 : strides[axis];
    block.src_strides[axis] = in_strides[axis] * stride;
    block.src_base += starts[axis] * in_strides[axis];
  }
  block_copy(call.inputs[0].data, call.outputs[0].data, block, width_of(call), call.pool);
}

void cpu_slice(const KernelCall& call) {
  const auto& p = std::get<SliceParams>(call.params);
  copy_window(call, p.start_indices, p.strides);
}

// Start indices clamped to [0, shape - window], as XLA does.
Dims clamped_starts(const KernelInput& starts, const Shape& shape, const Shape& window) {
  Dims clamped;
  visit_dtype(starts.aval->dtype, [&](auto tag) {
    using S = storage_t<decltype(tag)::value>;
    if constexpr (std::is_integral_v<S> && !std::is_same_v<S, bool>) {
      const S* values = static_cast<const S*>(starts.data);
      for (int64_t axis = 0; axis < shape.rank(); ++axis) {
        clamped.push_back(
            std::clamp<int64_t>(static_cast<int64_t>(values[axis]), 0, shape[axis] - window[axis]));
      }
    } else {
      KILN_CHECK(false, "start indices of dtype {}", dtype_name(starts.aval->dtype));
    }
  });
  return clamped;
}

void cpu_dynamic_slice(const KernelCall& call) {
  copy_window(
      call, clamped_starts(call.inputs[1], call.inputs[0].aval->shape, call.outputs[0].aval->shape),
      {});
}

void cpu_dynamic_update_slice(const KernelCall& call) {
  const Shape& out_shape = call.outputs[0].aval->shape;
  const Shape& update_shape = call.inputs[1].aval->shape;
  parallel_memcpy(call.outputs[0].data, call.inputs[0].data, call.outputs[0].aval->size_bytes(),
                  call.pool);
  Dims starts = clamped_starts(call.inputs[2], out_shape, update_shape);
  Block block = dense_block(update_shape);
  block.dst_strides = out_shape.strides();
  for (size_t axis = 0; axis < starts.size(); ++axis) {
    block.dst_base += starts[axis] * block.dst_strides[axis];
  }
  block_copy(call.inputs[1].data, call.outputs[0].data, block, width_of(call), call.pool);
}

void cpu_concatenate(const KernelCall& call) {
  auto dimension = static_cast<size_t>(std::get<ConcatenateParams>(call.params).dimension);
  Dims out_strides = call.outputs[0].aval->shape.strides();
  int64_t offset = 0;  // where the current operand starts along `dimension`
  for (const KernelInput& input : call.inputs) {
    Block block = dense_block(input.aval->shape);
    block.dst_strides = out_strides;
    block.dst_base = offset * out_strides[dimension];
    block_copy(input.data, call.outputs[0].data, block, width_of(call), call.pool);
    offset += input.aval->shape[static_cast<int64_t>(dimension)];
  }
}

// Pad params may be huge (a big interior on a size-1 axis is legal), so positions are
// worked out in 128 bits; only those inside the output are used as offsets.
using Wide = __int128;
Wide ceil_div(Wide a, Wide b) {  // b > 0
  return a >= 0 ? (a + b - 1) / b : -((-a) / b);
}

void cpu_pad(const KernelCall& call) {
  const auto& p = std::get<PadParams>(call.params);
  const Shape& in_shape = call.inputs[0].aval->shape;
  const Shape& out_shape = call.outputs[0].aval->shape;
  int64_t width = width_of(call);
  // Fill everything with the padding value (a stride-0 read), then place the operand.
  Block fill = dense_block(out_shape);
  std::fill(fill.src_strides.begin(), fill.src_strides.end(), 0);
  block_copy(call.inputs[1].data, call.outputs[0].data, fill, width, call.pool);

  Block block = dense_block(in_shape);
  Dims out_strides = out_shape.strides();
  for (size_t axis = 0; axis < out_strides.size(); ++axis) {
    auto a = static_cast<int64_t>(axis);
    Wide step = Wide{p.interior[axis]} + 1;
    Wide low = p.low[axis];
    // Operand elements i with 0 <= low + i * step < out size; the rest are cropped.
    Wide first = low >= 0 ? 0 : ceil_div(-low, step);
    Wide end = std::min(Wide{in_shape[a]}, ceil_div(Wide{out_shape[a]} - low, step));
    if (end <= first) return;  // every operand element is cropped away
    auto count = static_cast<int64_t>(end - first);
    block.sizes[axis] = count;
    block.src_base += static_cast<int64_t>(first) * block.src_strides[axis];
    // Within the output once count > 1, so these fit in 64 bits.
    block.dst_strides[axis] = count > 1 ? out_strides[axis] * static_cast<int64_t>(step) : 0;
    block.dst_base += static_cast<int64_t>(low + first * step) * out_strides[axis];
  }
  block_copy(call.inputs[0].data, call.outputs[0].data, block, width, call.pool);
}

// The reference's values written run by run: each run of `inner` elements shares its index
// along the dimension, so no multi-dimensional index is stepped per element (the
// reference's for_each_index is), which matters when a program makes an iota of a whole
// vocabulary.
void cpu_iota(const KernelCall& call) {
  const auto& p = std::get<IotaParams>(call.params);
  const Dims& dims = p.shape.dims();
  const auto axis = static_cast<size_t>(p.dimension);
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < axis; ++d) outer *= dims[d];
  for (size_t d = axis + 1; d < dims.size(); ++d) inner *= dims[d];
  const int64_t extent = dims[axis];
  visit_dtype(p.dtype, [&](auto tag) {
    using S = storage_t<decltype(tag)::value>;
    S* out = static_cast<S*>(call.outputs[0].data);
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t k = 0; k < extent; ++k) {
        // Integers wrap (as convert_element_type does); floats round to nearest.
        std::fill_n(out, inner, convert_element<S>(k));
        out += inner;
      }
    }
  });
}

}  // namespace
}  // namespace shape_kernels

void register_cpu_shape(PrimTable& table) {
  namespace sk = shape_kernels;
  table[prim::broadcast_in_dim].cpu_kernel = sk::cpu_broadcast_in_dim;
  table[prim::reshape].cpu_kernel = sk::cpu_reshape;
  table[prim::transpose].cpu_kernel = sk::cpu_transpose;
  table[prim::slice].cpu_kernel = sk::cpu_slice;
  table[prim::dynamic_slice].cpu_kernel = sk::cpu_dynamic_slice;
  table[prim::dynamic_update_slice].cpu_kernel = sk::cpu_dynamic_update_slice;
  table[prim::concatenate].cpu_kernel = sk::cpu_concatenate;
  table[prim::pad].cpu_kernel = sk::cpu_pad;
  table[prim::iota].cpu_kernel = sk::cpu_iota;
}

}  // namespace kiln
