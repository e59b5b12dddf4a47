// Double-buffered compiled kernels (CallOptions::double_buffer, src/pallas/block_copier.h):
// every shipped kernel gives the same bits with the next point's blocks copied ahead as
// without, every copy handed to the copier runs once (by the copier or taken back by its
// worker), and a recorded trace shows the copies and the compute as separate events.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "base/trace_events.h"
#include "kiln/ops.h"
#include "kiln/pallas.h"
#include "kiln/random.h"
#include "pallas/block_copier.h"
#include "pallas/kernel_call.h"
#include "support/arrays.h"

namespace kiln::pallas::double_buffering {
namespace {

using ::kiln::testing::same_bits;

Array normal(uint64_t seed, Shape shape, DType dtype = DType::f32) {
  return astype(random::normal(random::key(seed), std::move(shape)), dtype);
}

struct ShippedRun {
  std::string name;
  std::function<std::vector<Array>()> run;
  bool in_order_axis = false;  // a unit of more than one point: copies ahead happen
};

// The shipped kernels on shapes their blocks do not divide; matmul and flash attention with
// several points along their in-order axis, where copies ahead happen (the row-wise kernels'
// grids have no such axis: every point is a unit of its own).
std::vector<ShippedRun> shipped_kernels(DType dtype) {
  Array a = normal(1, {70, 90}, dtype), b = normal(2, {90, 45}, dtype);
  Array x = normal(3, {33, 100}, dtype);
  Array scale = normal(4, {100}, dtype), bias = normal(5, {100}, dtype);
  Array labels = random::randint(random::key(6), Shape({33}), 0, 100);
  Array g = normal(7, {33});
  Array q = normal(8, {2, 37, 16}, dtype), k = normal(9, {2, 37, 16}, dtype),
        v = normal(10, {2, 37, 16}, dtype), d_out = normal(11, {2, 37, 16}, dtype);
  return {
      {"matmul",
       [=] {
         return std::vector{matmul(a, b, {16, 16, 16})};
       },
       true},
      {"softmax", [=] { return std::vector{softmax(x * 30.0, 8)}; }},
      {"layer_norm", [=] { return std::vector{layer_norm(x, scale, bias, 1e-5, 8)}; }},
      {"softmax_cross_entropy",
       [=] {
         return std::vector{softmax_cross_entropy(x, labels, 8),
                            softmax_cross_entropy_grad(x, labels, g, 8)};
       }},
      {"flash attention, causal",
       [=] {
         AttentionGrads grads = flash_attention_grad(q, k, v, d_out, true, {16, 8});
         return std::vector{flash_attention(q, k, v, true, {16, 8}), grads.dq, grads.dk, grads.dv};
       },
       true},
  };
}

std::vector<Array> run_with(bool double_buffer, const std::function<std::vector<Array>()>& f) {
  detail::ForcedMode compiled(false);
  detail::ForcedDoubleBuffer buffering(double_buffer);
  std::vector<Array> results = f();
  for (Array& result : results) result.block_until_ready();
  return results;
}

int64_t copies_run() {
  detail::BlockCopyCounts counts = detail::block_copy_counts();
  return counts.by_copier + counts.taken_back;
}

TEST(PallasDoubleBuffer, EveryShippedKernelGivesTheSameBitsWithCopiesAhead) {
  for (DType dtype : {DType::f32, DType::bf16}) {
    for (const ShippedRun& kernel : shipped_kernels(dtype)) {
      const std::string what = kernel.name + " " + std::string(dtype_name(dtype));
      std::vector<Array> plain = run_with(false, kernel.run);
      const int64_t before = copies_run();
      std::vector<Array> buffered = run_with(true, kernel.run);
      ASSERT_EQ(plain.size(), buffered.size()) << what;
      for (size_t i = 0; i < plain.size(); ++i) {
        EXPECT_TRUE(same_bits(buffered[i], plain[i])) << what << ", result " << i;
      }
      if (kernel.in_order_axis) {
        EXPECT_GT(copies_run(), before) << what;
      } else {
        EXPECT_EQ(copies_run(), before) << what;
      }
    }
  }
}

TEST(PallasDoubleBuffer, OffCopiesNothingAhead) {
  const int64_t before = copies_run();
  for (const ShippedRun& kernel : shipped_kernels(DType::f32)) run_with(false, kernel.run);
  EXPECT_EQ(copies_run(), before);
}

TEST(PallasDoubleBuffer, ATraceShowsEachCopyAheadAndTheComputeAsSeparateEvents) {
  Array a = normal(1, {64, 256}), b = normal(2, {256, 64});
  run_with(true, [&] { return std::vector{matmul(a, b, {32, 32, 32})}; });  // compiled once
  const int64_t before = copies_run();
  trace::begin_recording();
  run_with(true, [&] { return std::vector{matmul(a, b, {32, 32, 32})}; });
  trace::Recording recording = trace::end_recording();
  const int64_t copies = copies_run() - before;

  int64_t copy_ahead_events = 0, compute_events = 0;
  for (const trace::Event& event : recording.events) {
    if (event.category != "pallas") continue;
    EXPECT_TRUE(event.name.rfind("matmul ", 0) == 0) << event.name;
    if (event.name == "matmul compute") {
      ++compute_events;
      EXPECT_GE(static_cast<int32_t>(event.track),
                static_cast<int32_t>(trace::Track::kKernelWorker0));
    }
    if (event.name == "matmul copy ahead") {
      ++copy_ahead_events;
      // Drawn by the copier, or by the worker that took the copy back.
      EXPECT_TRUE(event.track == trace::Track::kBlockCopier ||
                  static_cast<int32_t>(event.track) >=
                      static_cast<int32_t>(trace::Track::kKernelWorker0))
          << trace::track_name(event.track);
    }
  }
  EXPECT_EQ(trace::track_name(trace::Track::kBlockCopier), "kernel block copier");
  EXPECT_EQ(trace::track_name(trace::kernel_worker_track(1)), "kernel worker 1");
  // A 2 x 2 x 8 grid: each of the 4 units computes 8 points and copies ahead for 7.
  EXPECT_EQ(compute_events, 32);
  EXPECT_EQ(copy_ahead_events, 28);
  EXPECT_EQ(copies, 28);
}

}  // namespace
}  // namespace kiln::pallas::double_buffering
