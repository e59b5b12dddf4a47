// The sampler: the Feistel permutation is a bijection for every small size and for the
// sizes 2^k and 2^k + 1 (where Grain's index_shuffle once was not), a pure function of
// (seed, epoch) that changes with either; shards split an epoch without duplicates or
// gaps; iterator state round-trips through JSON and bad state is refused by name.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <set>
#include <vector>

#include "data/sampler.h"
#include "support/errors.h"

namespace kiln::data {
namespace {

using ::kiln::testing::fails_with;

// Whether order(0..size-1) hits every value of [0, size) exactly once.
::testing::AssertionResult is_permutation(int64_t size, uint64_t seed, uint64_t epoch) {
  EpochPermutation order(size, seed, epoch);
  std::vector<uint8_t> seen(static_cast<size_t>(size), 0);
  for (int64_t position = 0; position < size; ++position) {
    int64_t value = order(position);
    if (value < 0 || value >= size) {
      return ::testing::AssertionFailure()
             << "size " << size << ": position " << position << " gives " << value;
    }
    if (seen[static_cast<size_t>(value)]++) {
      return ::testing::AssertionFailure() << "size " << size << " seed " << seed << " epoch "
                                           << epoch << ": value " << value << " twice";
    }
  }
  return ::testing::AssertionSuccess();
}

TEST(EpochPermutation, IsABijectionForEverySmallSize) {
  for (int64_t size = 0; size <= 300; ++size) {
    for (uint64_t seed : {0ULL, 1ULL, 0xFFFFFFFFFFFFFFFFULL}) {
      for (uint64_t epoch : {0ULL, 7ULL}) ASSERT_TRUE(is_permutation(size, seed, epoch));
    }
  }
}

TEST(EpochPermutation, IsABijectionForPowersOfTwoAndOneMore) {
  for (int k = 1; k <= 18; ++k) {
    int64_t power = int64_t{1} << k;
    for (int64_t size : {power - 1, power, power + 1}) {
      ASSERT_TRUE(is_permutation(size, 42, 3));
    }
  }
}

TEST(EpochPermutation, IsAPureFunctionOfSeedAndEpoch) {
  EpochPermutation a(1000, 5, 2), b(1000, 5, 2);
  EpochPermutation other_epoch(1000, 5, 3), other_seed(1000, 6, 2);
  int64_t same = 0, moved_epoch = 0, moved_seed = 0, fixed_points = 0;
  for (int64_t i = 0; i < 1000; ++i) {
    same += a(i) == b(i);
    moved_epoch += a(i) != other_epoch(i);
    moved_seed += a(i) != other_seed(i);
    fixed_points += a(i) == i;
  }
  EXPECT_EQ(same, 1000);
  // A random permutation of 1000 keeps about one position in common with another.
  EXPECT_GT(moved_epoch, 980);
  EXPECT_GT(moved_seed, 980);
  EXPECT_LT(fixed_points, 20);
}

TEST(EpochPermutation, RefusesPositionsOutsideItsSize) {
  EpochPermutation order(10, 0, 0);
  EXPECT_TRUE(fails_with([&] { order(10); }, {"position 10 is outside [0, 10)"}));
  EXPECT_TRUE(fails_with([&] { order(-1); }, {"position -1"}));
  EXPECT_TRUE(fails_with([] { EpochPermutation(-3, 0, 0); }, {"size must be >= 0, got -3"}));
}

TEST(ShardRange, SplitsEvenlyWithTheRemainderFirst) {
  // 10 positions on 3 shards: 4, 3, 3 (Grain's even_split).
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (int64_t i = 0; i < 3; ++i) {
    PositionRange range = shard_range(10, {i, 3, false});
    ranges.emplace_back(range.begin, range.end);
  }
  EXPECT_THAT(ranges, ::testing::ElementsAre(std::pair<int64_t, int64_t>{0, 4},
                                             std::pair<int64_t, int64_t>{4, 7},
                                             std::pair<int64_t, int64_t>{7, 10}));
  // drop_remainder: 3 each, position 9 unread.
  PositionRange last = shard_range(10, {2, 3, true});
  EXPECT_EQ(last.begin, 6);
  EXPECT_EQ(last.end, 9);
}

TEST(ShardRange, RefusesBadOptions) {
  EXPECT_TRUE(fails_with([] { shard_range(10, {3, 3, false}); }, {"shard index 3 of 3"}));
  EXPECT_TRUE(fails_with([] { shard_range(10, {0, 0, false}); }, {"count >= 1"}));
  EXPECT_TRUE(fails_with([] { shard_range(10, {-1, 2, false}); }, {"shard index -1 of 2"}));
}

// Every record exactly once per epoch over all shards (or, with drop_remainder, every
// record but size % count, each at most once, all shards equally long).
TEST(Sampler, ShardsTogetherReadEveryRecordOnce) {
  for (int64_t records : {1, 7, 64, 65, 1001}) {
    for (int64_t count : {1, 2, 3, 8}) {
      for (bool drop : {false, true}) {
        std::multiset<int64_t> seen;
        std::set<int64_t> lengths;
        for (int64_t index = 0; index < count; ++index) {
          Sampler sampler({records, 9, true, {index, count, drop}});
          lengths.insert(sampler.epoch_length());
          for (int64_t p = 0; p < sampler.epoch_length(); ++p) seen.insert(sampler.record(4, p));
        }
        int64_t expected = drop ? records / count * count : records;
        ASSERT_EQ(static_cast<int64_t>(seen.size()), expected) << records << " on " << count;
        std::set<int64_t> unique(seen.begin(), seen.end());
        ASSERT_EQ(unique.size(), seen.size()) << "a record read twice";
        if (drop) {
          EXPECT_EQ(lengths.size(), 1u);
        }
      }
    }
  }
}

TEST(Sampler, WithoutShuffleReadsFileOrder) {
  Sampler sampler({10, 3, false, {1, 2, false}});
  std::vector<int64_t> records(5);
  sampler.records(0, 0, 5, records.data());
  EXPECT_THAT(records, ::testing::ElementsAre(5, 6, 7, 8, 9));
  EXPECT_EQ(sampler.global_index(2, 1), 2 * 10 + 5 + 1);
}

TEST(Sampler, BatchOfRecordsEqualsRecordByRecord) {
  Sampler sampler({1000, 11, true, {}});
  std::vector<int64_t> batch(100);
  sampler.records(3, 250, 100, batch.data());
  for (int64_t i = 0; i < 100; ++i)
    EXPECT_EQ(batch[static_cast<size_t>(i)], sampler.record(3, 250 + i));
  EXPECT_TRUE(fails_with([&] { sampler.records(0, 990, 20, batch.data()); },
                         {"positions [990, 1010) of epoch 0", "[0, 1000)"}));
}

TEST(IteratorState, RoundTripsThroughJson) {
  IteratorState state{3, 512};
  nlohmann::json json = to_json(state);
  EXPECT_EQ(json.dump(), R"({"epoch":3,"position":512})");
  EXPECT_EQ(iterator_state_from_json(nlohmann::json::parse(json.dump())), state);
}

TEST(IteratorState, RefusesMissingOrBadFields) {
  EXPECT_TRUE(fails_with(
      [] {
        iterator_state_from_json(nlohmann::json{{"epoch", 1}});
      },
      {"missing field 'position'"}));
  EXPECT_TRUE(fails_with(
      [] {
        iterator_state_from_json(nlohmann::json{{"epoch", -1}, {"position", 0}});
      },
      {"'epoch' must be an integer >= 0, got -1"}));
  EXPECT_TRUE(fails_with(
      [] {
        iterator_state_from_json(nlohmann::json{{"epoch", 1}, {"position", "x"}});
      },
      {"'position' must be an integer >= 0"}));
  EXPECT_TRUE(fails_with([] { iterator_state_from_json(nlohmann::json::array()); },
                         {"missing field 'epoch'"}));
}

}  // namespace
}  // namespace kiln::data
