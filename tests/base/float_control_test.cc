// Flush-to-zero as a per-thread state that the compute pool carries to its workers, so a
// kernel's result never depends on which thread ran which chunk.
#include "base/float_control.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <limits>
#include <vector>

#include "base/compute_pool.h"

namespace kiln {
namespace {

// A product whose IEEE result is subnormal; volatile so that it is computed at run time.
float subnormal_product() {
  volatile float tiny = std::numeric_limits<float>::min();  // smallest normal
  volatile float half = 0.5f;
  return tiny * half;
}

#if defined(__x86_64__)
TEST(FloatControl, ScopedFlushMakesSubnormalResultsZeroAndRestores) {
  const uint32_t ieee = float_control();
  EXPECT_NE(subnormal_product(), 0.0f);
  {
    ScopedFloatControl flush(with_flush_denormals(ieee, true));
    EXPECT_EQ(subnormal_product(), 0.0f);
  }
  EXPECT_EQ(float_control(), ieee);
  EXPECT_NE(subnormal_product(), 0.0f);
}

TEST(FloatControl, PoolChunksRunUnderTheCallersState) {
  ComputePool pool(2);
  for (bool flush : {true, false}) {
    ScopedFloatControl mode(with_flush_denormals(float_control(), flush));
    std::vector<float> results(64, -1.0f);
    std::vector<uint32_t> controls(64, 0);
    pool.parallel_for(64, [&](int64_t chunk) {
      results[static_cast<size_t>(chunk)] = subnormal_product();
      controls[static_cast<size_t>(chunk)] = float_control();
    });
    for (size_t i = 0; i < results.size(); ++i) {
      EXPECT_EQ(results[i] == 0.0f, flush) << "chunk " << i;
      EXPECT_EQ(controls[i], float_control()) << "chunk " << i;
    }
  }
}
#endif

TEST(FloatControl, ClearingTheFlushLeavesOtherBitsAlone) {
  const uint32_t control = float_control();
  EXPECT_EQ(with_flush_denormals(with_flush_denormals(control, true), false),
            with_flush_denormals(control, false));
  EXPECT_EQ(with_flush_denormals(control, false) & ~with_flush_denormals(0xffffffffu, false), 0u);
}

}  // namespace
}  // namespace kiln
