// numpy.pad's computed modes (linear_ramp, maximum, minimum, mean, median) where the
// jax.numpy cross-check does not reach: integer arrays (floored ramps, means and medians
// rounded half to even), NaN, gradients, and an empty axis. Values of float arrays against
// jax.numpy.pad: JnpCrosscheck.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kiln/array_functions.h"
#include "kiln/ops.h"
#include "kiln/transforms.h"
#include "support/arrays.h"
#include "support/errors.h"

namespace kiln {
namespace {
using ::kiln::testing::fails_with;
using ::kiln::testing::values;

using Widths = std::vector<std::pair<int64_t, int64_t>>;

TEST(PadModes, IntegersFloorTheRampAndRoundStatisticsHalfToEven) {
  Array x = from_host<int32_t>({4, 1, 2, 9}, {4});
  // Before: from 0 toward the edge 4 in 3 steps, 0, 1.33, 2.67, floored. After: from 0
  // toward 9 in 2 steps, 0 and 4.5, floored, read outward from the edge: 4, 0.
  EXPECT_EQ(pad(x, Widths{{3, 2}}, PadMode::kLinearRamp).to_vector<int32_t>(),
            (std::vector<int32_t>{0, 1, 2, 4, 1, 2, 9, 4, 0}));
  // mean 4, median (2 + 4) / 2 = 3; [1, 2] has mean and median 1.5 -> 2 (half to even).
  EXPECT_EQ(pad(x, Widths{{1, 1}}, PadMode::kMean).to_vector<int32_t>(),
            (std::vector<int32_t>{4, 4, 1, 2, 9, 4}));
  EXPECT_EQ(pad(x, Widths{{1, 0}}, PadMode::kMedian).to_vector<int32_t>(),
            (std::vector<int32_t>{3, 4, 1, 2, 9}));
  Array pair = from_host<int32_t>({1, 2}, {2});
  EXPECT_EQ(pad(pair, Widths{{0, 1}}, PadMode::kMean).to_vector<int32_t>(),
            (std::vector<int32_t>{1, 2, 2}));
  EXPECT_EQ(pad(x, Widths{{1, 1}}, PadMode::kMaximum).to_vector<int32_t>(),
            (std::vector<int32_t>{9, 4, 1, 2, 9, 9}));
  EXPECT_EQ(pad(x, Widths{{2, 0}}, PadMode::kMinimum).to_vector<int32_t>(),
            (std::vector<int32_t>{1, 1, 4, 1, 2, 9}));
}

TEST(PadModes, LaterAxesSeeTheEarlierPaddingAndNaNIsTheMedian) {
  // Axis 0 first: the column maxima join the array, then each row's maximum pads axis 1.
  Array m = from_host<double>({1, 5, 3, 2}, {2, 2});
  EXPECT_EQ(values(pad(m, Widths{{1, 0}, {0, 1}}, PadMode::kMaximum)),
            (std::vector<double>{3, 5, 5, 1, 5, 5, 3, 2, 3}));
  Array with_nan = from_host<double>({1, NAN, 3}, {3});
  std::vector<double> padded = values(pad(with_nan, Widths{{1, 0}}, PadMode::kMedian));
  EXPECT_TRUE(std::isnan(padded[0]));
}

TEST(PadModes, GradientsMatchFiniteDifferences) {
  Array x = from_host<double>({0.3, -1.2, 2.5, 0.7, 1.9, -0.4}, {2, 3});
  for (PadMode mode : {PadMode::kLinearRamp, PadMode::kMaximum, PadMode::kMinimum, PadMode::kMean,
                       PadMode::kMedian}) {
    auto f = [mode](const Array& v) { return pad(v, Widths{{1, 2}, {2, 1}}, mode, 0.25); };
    EXPECT_NO_THROW(check_grads(f, std::tuple{x}, {.forward = true}));
  }
}

TEST(PadModes, AnEmptyAxisHasNoStatistic) {
  Array empty = zeros({0, 3});
  EXPECT_TRUE(fails_with(
      [&] {
        pad(empty, Widths{{1, 0}, {0, 0}}, PadMode::kMean);
      },
      {"pad: mode mean cannot extend axis 0 of f32[0,3]: it is empty"}));
}

}  // namespace
}  // namespace kiln
