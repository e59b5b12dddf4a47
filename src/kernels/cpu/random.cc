// Fast CPU kernel of threefry2x32: the same 20-round hash as the reference, vectorised
// (cpu/threefry_simd.h), walked over the broadcast operands in runs (cpu/broadcast_layout.h)
// and split into size-determined chunks across the compute pool. Every element is hashed
// independently, so the bits never depend on the thread count or the chunking. bitcast_convert_type
// needs no fast kernel: eager mode shares its operand's buffer.
#include "prims/ids/random.h"
#include "kernels/cpu/broadcast_layout.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/threefry_simd.h"

namespace kiln {
namespace {

// Elements per chunk: a hash is ~100 integer operations, so chunks can be smaller than
// for memory-bound elementwise ops.
constexpr int64_t kMinHashChunk = 4096;

void cpu_threefry2x32(const KernelCall& call) {
  const Shape& out_shape = call.outputs[0].aval->shape;
  auto layout =
      plan_broadcast<4>(out_shape, {&call.inputs[0].aval->shape, &call.inputs[1].aval->shape,
                                    &call.inputs[2].aval->shape, &call.inputs[3].aval->shape});
  std::array<const uint32_t*, 4> in;
  for (size_t k = 0; k < 4; ++k) in[k] = static_cast<const uint32_t*>(call.inputs[k].data);
  auto* out0 = static_cast<uint32_t*>(call.outputs[0].data);
  auto* out1 = static_cast<uint32_t*>(call.outputs[1].data);
  const auto& contiguous = layout.inner_contiguous;
  for_each_run(layout, call.pool, kMinHashChunk,
               [&](int64_t at, const std::array<int64_t, 4>& offset, int64_t length) {
                 simd::ThreefryRun run{in[0] + offset[0],
                                       in[1] + offset[1],
                                       in[2] + offset[2],
                                       in[3] + offset[3],
                                       contiguous[0] ? 1u : 0u,
                                       contiguous[1] ? 1u : 0u,
                                       contiguous[2] ? 1u : 0u,
                                       contiguous[3] ? 1u : 0u,
                                       out0 + at,
                                       out1 + at};
                 simd::threefry2x32_run(run, static_cast<size_t>(length));
               });
}

}  // namespace

void register_cpu_random(PrimTable& table) {
  table[prim::threefry2x32].cpu_kernel = cpu_threefry2x32;
}

}  // namespace kiln
