// Fashion-MNIST through load_dataset (data.dataset = "fashion_mnist") on a small fake
// dataset: its default contract (u8 [28, 28] images, 10 classes), empty splits, plain and
// gzip files, limits, corrupt files; and the real files from the Debian package.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <iostream>

#include "data/dataset.h"
#include "data/idx_files.h"
#include "support/errors.h"

namespace kiln::data {
namespace {

namespace fs = std::filesystem;
using ::kiln::testing::Bytes;
using ::kiln::testing::error_of;
using ::kiln::testing::gzip_bytes;
using ::kiln::testing::idx_bytes;
using ::kiln::testing::iota_bytes;
using ::kiln::testing::ScratchDir;
using ::kiln::testing::write_bytes;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr uint32_t kSide = 28;

// train: n_train images whose pixels are (i % 251), labels i % 10; test likewise.
void write_fake(const fs::path& dir, uint32_t n_train, uint32_t n_test, bool gzip = true) {
  auto put = [&](const std::string& name, const Bytes& bytes) {
    if (gzip) {
      write_bytes(dir / (name + ".gz"), gzip_bytes(bytes));
    } else {
      write_bytes(dir / name, bytes);
    }
  };
  put("train-images-idx3-ubyte", idx_bytes({n_train, kSide, kSide}, iota_bytes(n_train * 784)));
  put("train-labels-idx1-ubyte", idx_bytes({n_train}, iota_bytes(n_train, 10)));
  put("t10k-images-idx3-ubyte", idx_bytes({n_test, kSide, kSide}, iota_bytes(n_test * 784)));
  put("t10k-labels-idx1-ubyte", idx_bytes({n_test}, iota_bytes(n_test, 10)));
}

Dataset load(const fs::path& dir, int64_t train_limit = 0, int64_t test_limit = 0) {
  DatasetSpec spec;
  spec.dir = dir.string();
  spec.train_limit = train_limit;
  spec.test_limit = test_limit;
  return load_dataset(spec);
}

TEST(FashionMnist, LoadsFakeDataset) {
  ScratchDir dir;
  write_fake(dir.path(), 12, 5);
  Dataset data = load(dir.path());
  EXPECT_EQ(data.num_classes, 10);
  EXPECT_THAT(data.train.features.shape, ElementsAre(12, 28, 28));
  EXPECT_EQ(data.train.size(), 12);
  EXPECT_THAT(data.test.features.shape, ElementsAre(5, 28, 28));
  EXPECT_THAT(data.test.labels, ElementsAre(0, 1, 2, 3, 4));
  EXPECT_EQ(data.train.features.bytes, iota_bytes(12 * 784));
  EXPECT_EQ(data.train.labels[11], 1);
}

// An empty split used to load, and then a run "completed" with 0 steps or printed a test
// accuracy of -nan%.
TEST(FashionMnist, AnEmptySplitIsAnError) {
  for (bool empty_train : {true, false}) {
    ScratchDir dir;
    write_fake(dir.path(), empty_train ? 0 : 4, empty_train ? 3 : 0);
    std::string message = error_of([&] { load(dir.path()); });
    EXPECT_THAT(message, HasSubstr(empty_train ? "the train split violates its contract"
                                               : "the test split violates its contract"));
    EXPECT_THAT(message, HasSubstr(empty_train ? "the train split has no records"
                                               : "the test split has no records"));
    // `kiln data validate` reports what `kiln train` refuses (it used to call it valid).
    DatasetSpec spec;
    spec.dir = dir.path().string();
    Dataset reported = load_dataset(spec, ViolationPolicy::kReport);
    const ValidationReport& report = empty_train ? reported.train_report : reported.test_report;
    ASSERT_EQ(report.violations.size(), 1u);
    EXPECT_EQ(rule_name(report.violations[0].rule), "empty");
    EXPECT_TRUE(report.split_level_violation);
  }
}

TEST(FashionMnist, UncompressedFilesAreAcceptedToo) {
  ScratchDir dir;
  write_fake(dir.path(), 3, 2, /*gzip=*/false);
  Dataset data = load(dir.path());
  EXPECT_THAT(data.train.labels, ElementsAre(0, 1, 2));
  EXPECT_THAT(data.test.features.shape, ElementsAre(2, 28, 28));
  EXPECT_THAT(data.files[2].path, ::testing::EndsWith("t10k-images-idx3-ubyte"));
}

TEST(FashionMnist, LimitsKeepTheFirstExamples) {
  ScratchDir dir;
  write_fake(dir.path(), 12, 5);
  Dataset data = load(dir.path(), 4, 2);
  EXPECT_THAT(data.train.features.shape, ElementsAre(4, 28, 28));
  EXPECT_EQ(data.train.features.bytes, iota_bytes(4 * 784));
  EXPECT_THAT(data.train.labels, ElementsAre(0, 1, 2, 3));
  EXPECT_EQ(data.test.size(), 2);
  // A limit over the count keeps everything.
  EXPECT_EQ(load(dir.path(), 100, 0).train.size(), 12);
  // A limit is part of the identity: the model sees other data.
  EXPECT_NE(load(dir.path(), 4, 2).identity, load(dir.path()).identity);
  EXPECT_THAT(error_of([&] { load(dir.path(), -1, 0); }),
              HasSubstr("data.train_limit must be >= 0 (0 keeps every example), got -1"));
}

TEST(FashionMnist, MissingFilesNameTheFileAndTheInstallHint) {
  ScratchDir dir;
  write_fake(dir.path(), 2, 2);
  fs::remove(dir / "t10k-labels-idx1-ubyte.gz");
  try {
    load(dir.path());
    FAIL() << "no error";
  } catch (const Error& error) {
    EXPECT_THAT(error.message(), HasSubstr("t10k-labels-idx1-ubyte.gz' does not exist"));
    EXPECT_THAT(error.hint(), HasSubstr("install the Debian package dataset-fashion-mnist "
                                        "(scripts/setup does)"));
  }
  EXPECT_THAT(error_of([&] { load(dir / "nowhere"); }),
              HasSubstr("(no directory '" + (dir / "nowhere").string() + "')"));
}

TEST(FashionMnist, LabelsMustBeClasses) {
  ScratchDir dir;
  write_fake(dir.path(), 2, 4);
  write_bytes(dir / "t10k-labels-idx1-ubyte.gz", gzip_bytes(idx_bytes({4}, {0, 9, 12, 1})));
  std::string message = error_of([&] { load(dir.path()); });
  EXPECT_THAT(message, HasSubstr("test split violates its contract"));
  EXPECT_THAT(message, HasSubstr("t10k-labels-idx1-ubyte.gz' record 2 has label 12; expected an "
                                 "integer in [0, 10)"));
}

TEST(FashionMnist, ImagesMustBe28By28AndLabelsRankOne) {
  ScratchDir dir;
  write_fake(dir.path(), 2, 2);
  write_bytes(dir / "train-images-idx3-ubyte.gz",
              gzip_bytes(idx_bytes({2, 28, 27}, iota_bytes(2 * 28 * 27))));
  EXPECT_THAT(error_of([&] { load(dir.path()); }),
              HasSubstr("holds records of shape [28,27] (array [2,28,27]), the contract says "
                        "[28,28]"));
  write_fake(dir.path(), 2, 2);
  write_bytes(dir / "t10k-labels-idx1-ubyte.gz", gzip_bytes(idx_bytes({2, 2}, {0, 1, 0, 1})));
  EXPECT_THAT(error_of([&] { load(dir.path()); }),
              HasSubstr("holds labels of shape [2,2], expected one label per record ([n])"));
}

TEST(FashionMnist, CorruptFileErrorPropagates) {
  ScratchDir dir;
  write_fake(dir.path(), 2, 2);
  write_bytes(dir / "train-images-idx3-ubyte.gz", {0x1f, 0x8b, 8, 0, 1, 2, 3});
  EXPECT_THAT(error_of([&] { load(dir.path()); }), HasSubstr("train-images-idx3-ubyte.gz"));
}

// The real dataset, from the Debian package dataset-fashion-mnist (scripts/setup installs
// it, so a missing package is a failure here, not a skip).
TEST(FashionMnist, RealDataset) {
  fs::path dir = "/usr/share/datasets/fashion-mnist";
  auto start = std::chrono::steady_clock::now();
  Dataset data = load(dir);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "load_dataset(fashion_mnist) took " << seconds << " s\n";
  EXPECT_THAT(data.train.features.shape, ElementsAre(60000, 28, 28));
  EXPECT_THAT(data.test.features.shape, ElementsAre(10000, 28, 28));
  EXPECT_THAT(data.train_report.class_histogram, ::testing::Each(6000));
  EXPECT_THAT(data.test_report.class_histogram, ::testing::Each(1000));
  EXPECT_EQ(data.train.labels[0], 9);  // the first training image is an ankle boot
  EXPECT_EQ(data.test.labels[0], 9);
  uint64_t pixel_sum = 0;
  for (uint8_t pixel : data.train.features.bytes) pixel_sum += pixel;
  // Fashion-MNIST's training mean pixel is 0.2860 * 255 = 72.94.
  EXPECT_NEAR(static_cast<double>(pixel_sum) / 47040000.0, 72.94, 0.05);
  // The Debian package's files, by content (the identity also covers the contract).
  EXPECT_EQ(data.files[0].sha256,
            "b0564c3eedabfbf835052cff8503ea422014ce006caf5b757f851416ee8300c7");
}

}  // namespace
}  // namespace kiln::data
