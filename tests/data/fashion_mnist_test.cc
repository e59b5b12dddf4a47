// load_fashion_mnist on a small fake dataset (every consistency check and the install hint
// for missing files), and on the real files when the Debian package is installed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <iostream>

#include "data/idx.h"
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

TEST(FashionMnist, LoadsFakeDataset) {
  ScratchDir dir;
  write_fake(dir.path(), 12, 5);
  FashionMnist data = load_fashion_mnist(dir.path());
  EXPECT_EQ(data.num_classes, 10);
  EXPECT_THAT(data.train.images.dims, ElementsAre(12, 28, 28));
  EXPECT_THAT(data.train.labels.dims, ElementsAre(12));
  EXPECT_THAT(data.test.images.dims, ElementsAre(5, 28, 28));
  EXPECT_THAT(data.test.labels.values, ElementsAre(0, 1, 2, 3, 4));
  EXPECT_EQ(data.train.images.values, iota_bytes(12 * 784));
  EXPECT_EQ(data.train.labels.values[11], 1);
}

// An empty split used to load, and then a run "completed" with 0 steps or printed a test
// accuracy of -nan%.
TEST(FashionMnist, AnEmptySplitIsAnError) {
  for (bool empty_train : {true, false}) {
    ScratchDir dir;
    write_fake(dir.path(), empty_train ? 0 : 4, empty_train ? 3 : 0);
    std::string message = error_of([&] { load_fashion_mnist(dir.path()); });
    EXPECT_THAT(message, HasSubstr(empty_train ? "train-images" : "t10k-images"));
    EXPECT_THAT(message, HasSubstr("holds no examples"));
  }
}

TEST(FashionMnist, UncompressedFilesAreAcceptedToo) {
  ScratchDir dir;
  write_fake(dir.path(), 3, 2, /*gzip=*/false);
  FashionMnist data = load_fashion_mnist(dir.path());
  EXPECT_THAT(data.train.labels.values, ElementsAre(0, 1, 2));
  EXPECT_THAT(data.test.images.dims, ElementsAre(2, 28, 28));
}

TEST(FashionMnist, LimitsKeepTheFirstExamples) {
  ScratchDir dir;
  write_fake(dir.path(), 12, 5);
  FashionMnist data = load_fashion_mnist(dir.path(), 4, 2);
  EXPECT_THAT(data.train.images.dims, ElementsAre(4, 28, 28));
  EXPECT_EQ(data.train.images.values, iota_bytes(4 * 784));
  EXPECT_THAT(data.train.labels.values, ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(data.test.labels.dims, ElementsAre(2));
  EXPECT_EQ(data.test.images.values.size(), 2u * 784);
  // A limit over the count keeps everything.
  FashionMnist all = load_fashion_mnist(dir.path(), 100, 0);
  EXPECT_THAT(all.train.labels.dims, ElementsAre(12));
  EXPECT_THAT(error_of([&] { load_fashion_mnist(dir.path(), -1, 0); }),
              HasSubstr("limits must be >= 0 (0 keeps every example), got train_limit -1"));
}

TEST(FashionMnist, MissingFilesNameTheFileAndTheInstallHint) {
  ScratchDir dir;
  write_fake(dir.path(), 2, 2);
  fs::remove(dir / "t10k-labels-idx1-ubyte.gz");
  try {
    load_fashion_mnist(dir.path());
    FAIL() << "no error";
  } catch (const Error& error) {
    EXPECT_THAT(error.message(), HasSubstr("t10k-labels-idx1-ubyte.gz' does not exist"));
    EXPECT_THAT(error.hint(), HasSubstr("install the Debian package dataset-fashion-mnist "
                                        "(scripts/setup does)"));
  }
  EXPECT_THAT(error_of([&] { load_fashion_mnist(dir / "nowhere"); }),
              HasSubstr("(no directory '" + (dir / "nowhere").string() + "')"));
}

TEST(FashionMnist, CountsMustAgree) {
  ScratchDir dir;
  write_fake(dir.path(), 6, 2);
  write_bytes(dir / "train-labels-idx1-ubyte.gz", gzip_bytes(idx_bytes({5}, iota_bytes(5, 10))));
  std::string message = error_of([&] { load_fashion_mnist(dir.path()); });
  EXPECT_THAT(message, HasSubstr("6 images in '"));
  EXPECT_THAT(message, HasSubstr("but 5 labels in '"));
  // Also when a limit means neither file is read to its end: the headers disagree.
  EXPECT_THAT(error_of([&] { load_fashion_mnist(dir.path(), 2, 0); }), HasSubstr("6 images in '"));
}

TEST(FashionMnist, LabelsMustBeClasses) {
  ScratchDir dir;
  write_fake(dir.path(), 2, 4);
  write_bytes(dir / "t10k-labels-idx1-ubyte.gz", gzip_bytes(idx_bytes({4}, {0, 9, 12, 1})));
  EXPECT_THAT(error_of([&] { load_fashion_mnist(dir.path()); }),
              HasSubstr("label 12 of example 2 in '"));
}

TEST(FashionMnist, ImagesMustBe28By28AndLabelsRankOne) {
  ScratchDir dir;
  write_fake(dir.path(), 2, 2);
  write_bytes(dir / "train-images-idx3-ubyte.gz",
              gzip_bytes(idx_bytes({2, 28, 27}, iota_bytes(2 * 28 * 27))));
  EXPECT_THAT(error_of([&] { load_fashion_mnist(dir.path()); }),
              HasSubstr("holds images of dims [2,28,27], expected [n,28,28]"));
  write_fake(dir.path(), 2, 2);
  write_bytes(dir / "t10k-labels-idx1-ubyte.gz", gzip_bytes(idx_bytes({2, 1}, {0, 1})));
  EXPECT_THAT(error_of([&] { load_fashion_mnist(dir.path()); }),
              HasSubstr("holds labels of dims [2,1], expected [n]"));
}

TEST(FashionMnist, CorruptFileErrorPropagates) {
  ScratchDir dir;
  write_fake(dir.path(), 2, 2);
  write_bytes(dir / "train-images-idx3-ubyte.gz", {0x1f, 0x8b, 8, 0, 1, 2, 3});
  EXPECT_THAT(error_of([&] { load_fashion_mnist(dir.path()); }),
              HasSubstr("train-images-idx3-ubyte.gz"));
}

// The real dataset, from the Debian package dataset-fashion-mnist.
TEST(FashionMnist, RealDataset) {
  fs::path dir = "/usr/share/datasets/fashion-mnist";
  if (!fs::exists(dir / "train-images-idx3-ubyte.gz")) GTEST_SKIP() << "no " << dir;
  auto start = std::chrono::steady_clock::now();
  FashionMnist data = load_fashion_mnist(dir);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "load_fashion_mnist took " << seconds << " s; first train labels:";
  for (int i = 0; i < 10; ++i) std::cout << " " << int{data.train.labels.values[i]};
  std::cout << "\n";
  EXPECT_THAT(data.train.images.dims, ElementsAre(60000, 28, 28));
  EXPECT_THAT(data.train.labels.dims, ElementsAre(60000));
  EXPECT_THAT(data.test.images.dims, ElementsAre(10000, 28, 28));
  EXPECT_THAT(data.test.labels.dims, ElementsAre(10000));
  std::array<int, 10> train_counts{}, test_counts{};
  for (uint8_t label : data.train.labels.values) ++train_counts[label];
  for (uint8_t label : data.test.labels.values) ++test_counts[label];
  for (int c = 0; c < 10; ++c) {
    EXPECT_EQ(train_counts[static_cast<size_t>(c)], 6000) << "class " << c;
    EXPECT_EQ(test_counts[static_cast<size_t>(c)], 1000) << "class " << c;
  }
  EXPECT_EQ(data.train.labels.values[0], 9);  // the first training image is an ankle boot
  EXPECT_EQ(data.test.labels.values[0], 9);
  uint64_t pixel_sum = 0;
  for (uint8_t pixel : data.train.images.values) pixel_sum += pixel;
  // Fashion-MNIST's training mean pixel is 0.2860 * 255 = 72.94.
  EXPECT_NEAR(static_cast<double>(pixel_sum) / 47040000.0, 72.94, 0.05);
}

}  // namespace
}  // namespace kiln::data
