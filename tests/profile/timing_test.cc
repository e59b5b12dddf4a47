// kiln::profile::time synchronizes, separates the first call, and summarises correctly;
// profile::alternate interleaves two functions and compares them pair by pair.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kiln/ops.h"
#include "kiln/profile.h"

namespace kiln {
namespace {

TEST(Profile, SummaryStatistics) {
  profile::Timing t = profile::summarize(9.0, {5, 1, 4, 2, 3, 6, 7, 8, 10, 9});
  EXPECT_EQ(t.first_call_s, 9.0);
  EXPECT_EQ(t.samples_s.front(), 5);  // call order kept
  EXPECT_EQ(t.median_s, 6);           // nearest rank of 10 sorted values at 0.5 -> index 5
  EXPECT_EQ(t.p10_s, 2);
  EXPECT_EQ(t.p90_s, 9);
  EXPECT_DOUBLE_EQ(t.mean_s, 5.5);
  EXPECT_EQ(profile::summarize(1, {}).median_s, 0);
}

TEST(Profile, TimesEveryCallToCompletion) {
  Array x = from_host<float>(std::vector<float>(1 << 16, 0.5f), {1 << 16});
  int calls = 0;
  std::vector<Array> results;
  profile::Timing t = profile::time(
      [&] {
        ++calls;
        results.push_back(exp(x));
        return results.back();
      },
      {.warmup = 1, .repeats = 5});
  EXPECT_EQ(calls, 7);
  EXPECT_EQ(t.samples_s.size(), 5u);
  // Each result was complete when its sample ended (synchronized timing), so nothing is
  // still pending now without another wait.
  for (const Array& r : results) {
    EXPECT_FLOAT_EQ(r.to_vector<float>()[0], std::exp(0.5f));
  }
  EXPECT_GT(t.first_call_s, 0);
  EXPECT_GE(t.p90_s, t.p10_s);
  EXPECT_NE(t.to_string().find("over 5"), std::string::npos);
}

TEST(Profile, VoidFunctionsSynchronizeAllDevices) {
  Array x = from_host<float>({1, 2}, {2});
  Array y;
  profile::Timing t = profile::time([&] { y = x * 3.0; }, {.warmup = 0, .repeats = 2});
  EXPECT_EQ(t.samples_s.size(), 2u);
  EXPECT_EQ(y.to_vector<float>()[1], 6.0f);
}

TEST(Profile, AlternateRunsAAndBInTurnAndComparesPairByPair) {
  std::string order;
  profile::AlternateOptions options;
  options.rounds = 3;
  options.calls = 2;
  profile::Alternation pairs =
      profile::alternate([&] { order += 'a'; }, [&] { order += 'b'; }, options);
  EXPECT_EQ(order,
            "ab"
            "aabb"
            "aabb"
            "aabb");  // one warm-up call each, then the rounds
  ASSERT_EQ(pairs.a_s.size(), 3u);
  ASSERT_EQ(pairs.b_s.size(), 3u);

  profile::Alternation made;
  made.a_s = {1, 2, 4};
  made.b_s = {3, 2, 2};
  EXPECT_EQ(made.ratios(), (std::vector<double>{3, 1, 0.5}));
  EXPECT_EQ(made.median_ratio(), 1);
  EXPECT_EQ(profile::format_ratios(made.ratios()), "3.00 1.00 0.50");
  EXPECT_EQ(profile::median({4, 1, 3, 2}), 3);  // the upper middle value
  EXPECT_EQ(profile::median({}), 0);
}

}  // namespace
}  // namespace kiln
