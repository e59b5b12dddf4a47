// Reference kernels of the bit-level primitives behind kiln::random: threefry2x32 (one
// 20-round hash per output element, operands broadcast) and bitcast_convert_type (a byte
// copy: same width, new dtype).
#include <cstring>

#include "kernels/broadcast_iter.h"
#include "kernels/ref/ref_kernels.h"
#include "kernels/threefry.h"
#include "prims/ids/convert.h"
#include "prims/ids/random.h"

namespace kiln {
namespace {

void ref_threefry2x32(const KernelCall& call) {
  const Shape& out_shape = call.outputs[0].aval->shape;
  std::array<Dims, 4> strides;
  std::array<const uint32_t*, 4> in;
  for (size_t k = 0; k < 4; ++k) {
    strides[k] = broadcast_strides(call.inputs[k].aval->shape, out_shape);
    in[k] = static_cast<const uint32_t*>(call.inputs[k].data);
  }
  auto* out0 = static_cast<uint32_t*>(call.outputs[0].data);
  auto* out1 = static_cast<uint32_t*>(call.outputs[1].data);
  for_each_broadcast(out_shape, strides, [&](int64_t i, const std::array<int64_t, 4>& at) {
    auto [y0, y1] = threefry::hash(in[0][at[0]], in[1][at[1]], in[2][at[2]], in[3][at[3]]);
    out0[i] = y0;
    out1[i] = y1;
  });
}

void ref_bitcast_convert_type(const KernelCall& call) {
  auto bytes = static_cast<size_t>(call.outputs[0].aval->size_bytes());
  if (bytes > 0) std::memcpy(call.outputs[0].data, call.inputs[0].data, bytes);
}

}  // namespace

void register_ref_random(PrimTable& table) {
  table[prim::threefry2x32].ref_kernel = ref_threefry2x32;
  table[prim::bitcast_convert_type].ref_kernel = ref_bitcast_convert_type;
}

}  // namespace kiln
