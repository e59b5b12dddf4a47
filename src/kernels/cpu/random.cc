// Fast CPU kernel of threefry2x32: the same 20-round hash as the reference, walked over
// the broadcast operands in runs (cpu/broadcast_layout.h) and split into size-determined
// chunks across the compute pool. Every element is hashed independently, so the bits never
// depend on the thread count or the chunking. bitcast_convert_type needs no fast kernel:
// eager mode shares its operand's buffer.
#include "prims/ids/random.h"
#include "kernels/cpu/broadcast_layout.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/threefry.h"

namespace kiln {
namespace {

// Elements per chunk: a hash is ~100 integer operations, so chunks can be smaller than
// for memory-bound elementwise ops.
constexpr int64_t kMinHashChunk = 4096;

// The inner loop with the operands' steps (0: broadcast, 1: contiguous) known at compile
// time for the common layout of random bits: one key, contiguous counters.
template <int S0, int S1, int S2, int S3>
void hash_run(const uint32_t* k0, const uint32_t* k1, const uint32_t* x0, const uint32_t* x1,
              uint32_t* y0, uint32_t* y1, int64_t length) {
  for (int64_t i = 0; i < length; ++i) {
    auto [a, b] = threefry::hash(k0[i * S0], k1[i * S1], x0[i * S2], x1[i * S3]);
    y0[i] = a;
    y1[i] = b;
  }
}

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
  bool keys_then_counters = !contiguous[0] && !contiguous[1] && contiguous[2] && contiguous[3];
  for_each_run(layout, call.pool, kMinHashChunk,
               [&](int64_t at, const std::array<int64_t, 4>& offset, int64_t length) {
                 const uint32_t* k0 = in[0] + offset[0];
                 const uint32_t* k1 = in[1] + offset[1];
                 const uint32_t* x0 = in[2] + offset[2];
                 const uint32_t* x1 = in[3] + offset[3];
                 if (keys_then_counters) {
                   hash_run<0, 0, 1, 1>(k0, k1, x0, x1, out0 + at, out1 + at, length);
                   return;
                 }
                 for (int64_t i = 0; i < length; ++i) {
                   auto [a, b] =
                       threefry::hash(k0[contiguous[0] ? i : 0], k1[contiguous[1] ? i : 0],
                                      x0[contiguous[2] ? i : 0], x1[contiguous[3] ? i : 0]);
                   out0[at + i] = a;
                   out1[at + i] = b;
                 }
               });
}

}  // namespace

void register_cpu_random(PrimTable& table) {
  table[prim::threefry2x32].cpu_kernel = cpu_threefry2x32;
}

}  // namespace kiln
