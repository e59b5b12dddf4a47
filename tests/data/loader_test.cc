// Batches and the prefetching loader: a batch holds the sampler's records for its
// positions, preprocessed; the last batch is kept or dropped; augmentation is a pure
// function of (key, global index), a crop-and-flip of the source image; the loader yields
// the same batches for every number of workers and prefetch depth, and resumes from its
// JSON state exactly where it stopped.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <set>

#include "data/batch.h"
#include "data/loader.h"
#include "kernels/threefry.h"
#include "support/errors.h"

namespace kiln::data {
namespace {

using ::kiln::testing::fails_with;
using ::testing::ElementsAre;

// `records` images of side x side u8 pixels: pixel (r, y, x) = (r * 7 + y * side + x) % 251 + 1
// (never 0, so padding is told apart), label r % 3.
Dataset image_dataset(int64_t records, int64_t side) {
  Dataset dataset;
  dataset.num_classes = 3;
  dataset.record_shape = {side, side};
  dataset.scale = {1.0f};
  for (Split* split : {&dataset.train, &dataset.test}) {
    split->features = RawArray{DType::u8, {records, side, side}, {}, "images"};
    for (int64_t r = 0; r < records; ++r) {
      for (int64_t i = 0; i < side * side; ++i) {
        split->features.bytes.push_back(static_cast<uint8_t>((r * 7 + i) % 251 + 1));
      }
      split->labels.push_back(static_cast<int32_t>(r % 3));
    }
  }
  return dataset;
}

std::vector<float> pixels_of(const Dataset& dataset, int64_t record) {
  int64_t size = dataset.train.features.record_size();
  std::vector<float> pixels(static_cast<size_t>(size));
  for (int64_t i = 0; i < size; ++i) {
    pixels[static_cast<size_t>(i)] =
        dataset.train.features.bytes[static_cast<size_t>(record * size + i)];
  }
  return pixels;
}

std::vector<float> row_of(const HostBatch& batch, int64_t row) {
  int64_t size = static_cast<int64_t>(batch.features.size()) / batch.rows();
  return {batch.features.data() + row * size, batch.features.data() + (row + 1) * size};
}

// DP-SGD's Poisson sampling: each record in with probability q by an integer comparison
// of its keyed draw, the same draw on every call, other draws on other steps; the batch
// padded to its rows with a mask, and a draw larger than the rows truncated and counted.
TEST(BatchAssembler, PoissonBatchesDrawEachRecordByItsOwnKeyedDraw) {
  Dataset dataset = image_dataset(2000, 2);
  Sampler sampler({2000, 3, true, {}});
  BatchOptions options{.batch_size = 100};
  options.poisson = PoissonSampling{.rate = 0.05, .rows = 160, .key = {7, 9}};
  BatchAssembler batches(dataset, dataset.train, sampler, options);
  EXPECT_EQ(batches.batches_per_epoch(), 20);
  // The rule by hand: record r of step s is in when threefry(threefry(key, s), r) < q 2^64.
  auto drawn = [](uint64_t step, int64_t record) {
    auto step_key =
        threefry::hash(7, 9, static_cast<uint32_t>(step >> 32), static_cast<uint32_t>(step));
    auto bits = threefry::hash(step_key[0], step_key[1], 0, static_cast<uint32_t>(record));
    uint64_t draw = (static_cast<uint64_t>(bits[0]) << 32) | bits[1];
    return draw < static_cast<uint64_t>(std::ldexp(0.05, 64));
  };
  std::set<std::vector<int64_t>> distinct;
  int64_t total = 0;
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    for (int64_t index = 0; index < 20; ++index) {
      HostBatch batch;
      batches.assemble(epoch, index, batch);
      std::vector<int64_t> expected;
      for (int64_t r = 0; r < 2000; ++r) {
        if (drawn(static_cast<uint64_t>(epoch * 20 + index), r)) expected.push_back(r);
      }
      ASSERT_EQ(batch.records, expected);
      EXPECT_EQ(batch.truncated, 0);
      EXPECT_EQ(batch.rows(), 160);
      EXPECT_EQ(batch.examples(), static_cast<int64_t>(expected.size()));
      ASSERT_EQ(batch.mask.size(), 160u);
      for (size_t row = 0; row < 160; ++row) {
        EXPECT_EQ(batch.mask[row], row < expected.size() ? 1.0f : 0.0f);
      }
      EXPECT_EQ(row_of(batch, 0), pixels_of(dataset, expected.front()));
      EXPECT_EQ(row_of(batch, 159), std::vector<float>(4, 0.0f));  // padding: zeros
      HostBatch again;
      batches.assemble(epoch, index, again);
      EXPECT_EQ(again.records, batch.records);
      distinct.insert(batch.records);
      total += batch.examples();
    }
  }
  EXPECT_EQ(distinct.size(), 40u);
  // 40 steps of Binomial(2000, 0.05): 4000 expected, standard deviation 62.
  EXPECT_NEAR(static_cast<double>(total), 4000, 6 * 62);
  // Too few rows: the first `rows` records are kept and the rest counted.
  options.poisson.rows = 50;
  BatchAssembler narrow(dataset, dataset.train, sampler, options);
  HostBatch batch, wide;
  narrow.assemble(0, 3, batch);
  batches.assemble(0, 3, wide);
  EXPECT_EQ(batch.rows(), 50);
  EXPECT_EQ(batch.truncated, wide.examples() - 50);
  EXPECT_EQ(batch.records, std::vector<int64_t>(wide.records.begin(), wide.records.begin() + 50));
  // Bad settings.
  options.poisson.rate = 1.5;
  EXPECT_TRUE(fails_with([&] { BatchAssembler(dataset, dataset.train, sampler, options); },
                         {"rate must be in (0, 1]"}));
}

TEST(BatchAssembler, BatchesHoldTheSamplersRecordsPreprocessed) {
  Dataset dataset = image_dataset(10, 4);
  dataset.scale = {0.5f};
  dataset.offset = {-1.0f};
  Sampler sampler({10, 3, true, {}});
  BatchAssembler batches(dataset, dataset.train, sampler, {.batch_size = 4});
  EXPECT_EQ(batches.batches_per_epoch(), 3);
  HostBatch batch;
  batches.assemble(2, 2, batch);
  EXPECT_THAT(batch.shape, ElementsAre(2, 4, 4, 1));  // the last batch: 10 = 4 + 4 + 2
  for (int64_t row = 0; row < 2; ++row) {
    int64_t record = sampler.record(2, 8 + row);
    EXPECT_EQ(batch.records[static_cast<size_t>(row)], record);
    EXPECT_EQ(batch.labels[static_cast<size_t>(row)], record % 3);
    std::vector<float> expected = pixels_of(dataset, record);
    for (float& value : expected) value = value * 0.5f - 1.0f;
    EXPECT_EQ(row_of(batch, row), expected);
  }
  EXPECT_EQ(reinterpret_cast<uintptr_t>(batch.features.data()) % 64, 0u);
  BatchAssembler dropping(dataset, dataset.train, sampler,
                          {.batch_size = 4, .drop_remainder = true});
  EXPECT_EQ(dropping.batches_per_epoch(), 2);
  EXPECT_TRUE(fails_with([&] { dropping.assemble(0, 2, batch); }, {"batch 2 of an epoch of 2"}));
}

// pad_remainder: the last batch keeps the full shape; its real rows are the unpadded
// batch's, the rest zeros with label 0 and mask 0; full batches carry a mask of ones.
TEST(BatchAssembler, PaddedLastBatchHasTheFullShapeAndAMask) {
  Dataset dataset = image_dataset(10, 4);
  Sampler sampler({10, 3, true, {}});
  BatchAssembler plain(dataset, dataset.train, sampler, {.batch_size = 4});
  BatchAssembler padded(dataset, dataset.train, sampler, {.batch_size = 4, .pad_remainder = true});
  EXPECT_EQ(padded.batches_per_epoch(), 3);
  HostBatch want, got;
  plain.assemble(1, 2, want);
  padded.assemble(1, 2, got);
  EXPECT_THAT(got.shape, ElementsAre(4, 4, 4, 1));
  EXPECT_EQ(got.rows(), 4);
  EXPECT_EQ(got.examples(), 2);
  EXPECT_EQ(got.padding, 2);
  EXPECT_THAT(got.mask, ElementsAre(1.0f, 1.0f, 0.0f, 0.0f));
  EXPECT_EQ(got.records, want.records);
  EXPECT_THAT(got.labels, ElementsAre(want.labels[0], want.labels[1], 0, 0));
  for (int64_t row = 0; row < 2; ++row) EXPECT_EQ(row_of(got, row), row_of(want, row));
  for (int64_t row = 2; row < 4; ++row) EXPECT_EQ(row_of(got, row), std::vector<float>(16, 0.0f));
  padded.assemble(1, 0, got);  // a full batch after a padded one: nothing left over
  EXPECT_EQ(got.padding, 0);
  EXPECT_THAT(got.mask, ElementsAre(1.0f, 1.0f, 1.0f, 1.0f));
  plain.assemble(1, 0, want);
  EXPECT_TRUE(want.mask.empty());
  EXPECT_TRUE(fails_with(
      [&] {
        BatchAssembler both(dataset, dataset.train, sampler,
                            {.batch_size = 4, .drop_remainder = true, .pad_remainder = true});
      },
      {"drop_remainder", "pad_remainder", "not both"}));
}

TEST(BatchAssembler, ExampleInputShapeAddsAChannelToImages) {
  EXPECT_THAT(example_input_shape({28, 28}), ElementsAre(28, 28, 1));
  EXPECT_THAT(example_input_shape({4}), ElementsAre(4));
  EXPECT_THAT(example_input_shape({8, 8, 3}), ElementsAre(8, 8, 3));
}

// The augmented image is the source shifted by (dy, dx) in [-p, p] (zeros outside) and
// possibly mirrored; returns whether some such transform explains `out`.
bool is_crop_of(const std::vector<float>& source, const std::vector<float>& out, int64_t side,
                int64_t padding, bool& flipped) {
  for (int flip = 0; flip < 2; ++flip) {
    for (int64_t dy = -padding; dy <= padding; ++dy) {
      for (int64_t dx = -padding; dx <= padding; ++dx) {
        bool match = true;
        for (int64_t y = 0; y < side && match; ++y) {
          for (int64_t x = 0; x < side && match; ++x) {
            int64_t sy = y + dy, sx = (flip ? side - 1 - x : x) + dx;
            bool inside = sy >= 0 && sy < side && sx >= 0 && sx < side;
            float expected = inside ? source[static_cast<size_t>(sy * side + sx)] : 0.0f;
            match = out[static_cast<size_t>(y * side + x)] == expected;
          }
        }
        if (match) {
          flipped = flip;
          return true;
        }
      }
    }
  }
  return false;
}

TEST(Augmentation, IsACropAndFlipDrawnFromTheGlobalIndex) {
  Dataset dataset = image_dataset(64, 6);
  Sampler sampler({64, 1, true, {}});
  AugmentOptions augment{.crop_padding = 2, .horizontal_flip = true, .key = {5, 6}};
  BatchAssembler by_8(dataset, dataset.train, sampler, {.batch_size = 8, .augment = augment});
  BatchAssembler by_64(dataset, dataset.train, sampler, {.batch_size = 64, .augment = augment});
  HostBatch whole, part;
  by_64.assemble(1, 0, whole);
  int flips = 0, unchanged = 0;
  std::set<std::vector<float>> distinct;
  for (int64_t row = 0; row < 64; ++row) {
    std::vector<float> out = row_of(whole, row);
    bool flipped = false;
    ASSERT_TRUE(
        is_crop_of(pixels_of(dataset, whole.records[static_cast<size_t>(row)]), out, 6, 2, flipped))
        << "row " << row;
    flips += flipped;
    unchanged += out == pixels_of(dataset, whole.records[static_cast<size_t>(row)]);
    distinct.insert(out);
  }
  // 64 draws of 2 x 25 transforms: both flips occur, and most images move.
  EXPECT_GT(flips, 10);
  EXPECT_LT(flips, 54);
  EXPECT_LT(unchanged, 10);
  // The same example (epoch, position) gets the same augmentation whatever the batch size.
  by_8.assemble(1, 5, part);
  for (int64_t row = 0; row < 8; ++row) EXPECT_EQ(row_of(part, row), row_of(whole, 40 + row));
  // Another epoch, another draw for the same record.
  HostBatch next_epoch;
  by_64.assemble(2, 0, next_epoch);
  int64_t record = whole.records[0];
  auto at = std::find(next_epoch.records.begin(), next_epoch.records.end(), record) -
            next_epoch.records.begin();
  int64_t same = 0;
  for (int64_t row = 0; row < 64; ++row) {
    int64_t r = whole.records[static_cast<size_t>(row)];
    auto other = std::find(next_epoch.records.begin(), next_epoch.records.end(), r) -
                 next_epoch.records.begin();
    same += row_of(whole, row) == row_of(next_epoch, other);
  }
  EXPECT_GE(at, 0);
  EXPECT_LT(same, 16);
}

TEST(Augmentation, NeedsImageRecords) {
  Dataset dataset = image_dataset(4, 2);
  dataset.record_shape = {4};
  dataset.train.features.shape = {4, 4};
  EXPECT_TRUE(fails_with(
      [&] {
        BatchAssembler(dataset, dataset.train, Sampler({4, 0, true, {}}),
                       {.batch_size = 2, .augment = {.horizontal_flip = true}});
      },
      {"augmentation", "needs 2-D image records", "shape [4]"}));
}

std::vector<std::vector<int64_t>> first_records(Loader& loader, int count) {
  std::vector<std::vector<int64_t>> out;
  for (int i = 0; i < count; ++i) out.push_back(loader.next().records);
  return out;
}

TEST(Loader, SameBatchesForEveryWorkerCountAndPrefetch) {
  Dataset dataset = image_dataset(50, 3);
  BatchAssembler batches(dataset, dataset.train, Sampler({50, 8, true, {}}), {.batch_size = 8});
  std::vector<std::vector<int64_t>> expected;
  std::vector<std::vector<float>> expected_pixels;
  HostBatch batch;
  for (int i = 0; i < 20; ++i) {  // 7 batches an epoch: three epochs and a bit
    batches.assemble(i / 7, i % 7, batch);
    expected.push_back(batch.records);
    expected_pixels.push_back(
        std::vector<float>(batch.features.data(), batch.features.data() + batch.features.size()));
  }
  for (int workers : {1, 2, 4}) {
    for (int prefetch : {1, 3, 8}) {
      Loader loader(batches, {workers, prefetch});
      for (int i = 0; i < 20; ++i) {
        const HostBatch& got = loader.next();
        ASSERT_EQ(got.epoch, i / 7);
        ASSERT_EQ(got.index, i % 7);
        ASSERT_EQ(got.records, expected[static_cast<size_t>(i)]) << workers << "/" << prefetch;
        ASSERT_EQ(
            std::vector<float>(got.features.data(), got.features.data() + got.features.size()),
            expected_pixels[static_cast<size_t>(i)]);
        EXPECT_GE(loader.last_wait_seconds(), 0);
      }
    }
  }
}

TEST(Loader, StateRoundTripsAndResumesExactly) {
  Dataset dataset = image_dataset(50, 3);
  BatchAssembler batches(dataset, dataset.train, Sampler({50, 8, true, {}}), {.batch_size = 8});
  Loader loader(batches, {2, 4});
  EXPECT_EQ(loader.state(), (IteratorState{0, 0}));
  first_records(loader, 9);
  IteratorState state = loader.state();
  EXPECT_EQ(state, (IteratorState{1, 16}));  // 7 batches in epoch 0, then 2 of epoch 1
  std::vector<std::vector<int64_t>> after = first_records(loader, 6);
  // A new loader from the saved JSON continues with the same batches...
  Loader resumed(batches, {3, 2},
                 iterator_state_from_json(nlohmann::json::parse(to_json(state).dump())));
  EXPECT_EQ(first_records(resumed, 6), after);
  // ...and so does restore() on the old one.
  loader.restore(state);
  EXPECT_EQ(first_records(loader, 6), after);
}

TEST(Loader, RefusesStatesItCannotResume) {
  Dataset dataset = image_dataset(50, 3);
  BatchAssembler batches(dataset, dataset.train, Sampler({50, 8, true, {}}), {.batch_size = 8});
  EXPECT_TRUE(fails_with(
      [&] {
        Loader(batches, {2, 4}, IteratorState{0, 5});
      },
      {"cannot resume at epoch 0 position 5", "multiple of the batch size 8"}));
  EXPECT_TRUE(fails_with(
      [&] {
        Loader(batches, {2, 4}, IteratorState{0, 56});
      },
      {"position in [0, 50]"}));
  EXPECT_TRUE(fails_with([&] { Loader(batches, {0, 4}); }, {"workers (0) and prefetch (4)"}));
}

}  // namespace
}  // namespace kiln::data
