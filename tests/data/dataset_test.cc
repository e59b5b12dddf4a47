// load_dataset: each source kind through its contracts, and the bad data the issue lists,
// each caught with its file and record index: NaN features, wrong shapes, out-of-range
// labels, truncated IDX and NPY files, malformed CSV rows, image/label count mismatch.
// Also: drops counted, report mode, preprocessing, and the dataset identity.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>

#include "data/dataset.h"
#include "data/idx_files.h"
#include "data/npy_files.h"
#include "support/errors.h"

namespace kiln::data {
namespace {

namespace fs = std::filesystem;
using ::kiln::testing::Bytes;
using ::kiln::testing::bytes_of;
using ::kiln::testing::error_of;
using ::kiln::testing::fails_with;
using ::kiln::testing::gzip_bytes;
using ::kiln::testing::idx_bytes;
using ::kiln::testing::iota_bytes;
using ::kiln::testing::npy_bytes;
using ::kiln::testing::npy_dict;
using ::kiln::testing::ScratchDir;
using ::kiln::testing::write_bytes;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

void write_npy_f32(const fs::path& path, const std::vector<float>& values, int64_t rows) {
  int64_t columns = static_cast<int64_t>(values.size()) / rows;
  write_bytes(path,
              npy_bytes(npy_dict("<f4", fmt::format("({}, {})", rows, columns)), bytes_of(values)));
}

void write_npy_labels(const fs::path& path, const std::vector<int64_t>& labels) {
  write_bytes(path,
              npy_bytes(npy_dict("<i8", fmt::format("({},)", labels.size())), bytes_of(labels)));
}

// An npy dataset of 2 features per record: train 6 records (labels 0,1,2,0,1,2), test 3.
DatasetSpec npy_spec(const ScratchDir& dir, std::vector<float> train_features = {},
                     std::vector<int64_t> train_labels = {}) {
  if (train_features.empty()) train_features = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  if (train_labels.empty()) train_labels = {0, 1, 2, 0, 1, 2};
  write_npy_f32(dir / "train_x.npy", train_features, static_cast<int64_t>(train_labels.size()));
  write_npy_labels(dir / "train_y.npy", train_labels);
  write_npy_f32(dir / "test_x.npy", {1, 1, 2, 2, 3, 3}, 3);
  write_npy_labels(dir / "test_y.npy", {2, 1, 0});
  DatasetSpec spec;
  spec.kind = "npy";
  spec.train_features = (dir / "train_x.npy").string();
  spec.train_labels = (dir / "train_y.npy").string();
  spec.test_features = (dir / "test_x.npy").string();
  spec.test_labels = (dir / "test_y.npy").string();
  spec.labels.num_classes = 3;
  return spec;
}

TEST(LoadDataset, NpyPairsWithTheirReportAndIdentity) {
  ScratchDir dir;
  Dataset dataset = load_dataset(npy_spec(dir));
  EXPECT_EQ(dataset.train.size(), 6);
  EXPECT_EQ(dataset.test.size(), 3);
  EXPECT_THAT(dataset.record_shape, ElementsAre(2));
  EXPECT_THAT(dataset.train.labels, ElementsAre(0, 1, 2, 0, 1, 2));
  EXPECT_THAT(dataset.train_report.class_histogram, ElementsAre(2, 2, 2));
  EXPECT_TRUE(dataset.train_report.violations.empty());
  EXPECT_EQ(dataset.normalize, "none");
  EXPECT_EQ(dataset.identity.size(), 64u);
  ASSERT_EQ(dataset.files.size(), 4u);
  EXPECT_EQ(dataset.files[0].role, "train_features");
}

TEST(LoadDataset, NanFeaturesAreCaughtWithFileAndRecord) {
  ScratchDir dir;
  DatasetSpec spec = npy_spec(dir, {0, 1, 2, 3, kNaN, 5, 6, 7, 8, 9, 10, 11});
  std::string message = error_of([&] { load_dataset(spec); });
  EXPECT_THAT(message, HasSubstr("train split violates its contract"));
  EXPECT_THAT(message, HasSubstr("finite"));
  EXPECT_THAT(message, HasSubstr("train_x.npy' record 2 element 0 is nan"));
  EXPECT_THAT(message, HasSubstr("on_violation = \"drop\""));
  spec.on_violation = "drop";
  Dataset dropped = load_dataset(spec);
  EXPECT_EQ(dropped.train.size(), 5);
  EXPECT_EQ(dropped.dropped_train, 1);
  EXPECT_THAT(dropped.train.labels, ElementsAre(0, 1, 0, 1, 2));
  // The report still says what was dropped.
  ASSERT_EQ(dropped.train_report.violations.size(), 1u);
  EXPECT_THAT(dropped.train_report.violations[0].first_records, ElementsAre(2));
}

TEST(LoadDataset, RangeContractNamesTheRecordAndBound) {
  ScratchDir dir;
  DatasetSpec spec = npy_spec(dir);
  spec.features.max = 9;
  std::string message = error_of([&] { load_dataset(spec); });
  EXPECT_THAT(message, HasSubstr("record 5 element 0 is 10; max is 9"));
  spec.features.max = INFINITY;
  spec.features.min = 1;
  EXPECT_THAT(error_of([&] { load_dataset(spec); }),
              HasSubstr("record 0 element 0 is 0; min is 1"));
}

TEST(LoadDataset, WrongShapeOrDtypeCannotBeDropped) {
  ScratchDir dir;
  DatasetSpec spec = npy_spec(dir);
  spec.features.shape = {3};
  spec.on_violation = "drop";
  std::string message = error_of([&] { load_dataset(spec); });
  EXPECT_THAT(message, HasSubstr("train_x.npy' holds records of shape [2]"));
  EXPECT_THAT(message, HasSubstr("the contract says [3]"));
  EXPECT_THAT(message, HasSubstr("dropping cannot repair"));
  spec.features.shape = {};
  spec.features.dtype = DType::u8;
  EXPECT_THAT(error_of([&] { load_dataset(spec); }),
              HasSubstr("train_x.npy' holds f32, the contract says u8"));
}

TEST(LoadDataset, TestSplitMustMatchTheTrainingShape) {
  ScratchDir dir;
  DatasetSpec spec = npy_spec(dir);
  write_npy_f32(dir / "test_x.npy", {1, 1, 1, 2, 2, 2, 3, 3, 3}, 3);
  EXPECT_THAT(error_of([&] { load_dataset(spec); }),
              HasSubstr("test_x.npy' holds records of shape [3]"));
}

TEST(LoadDataset, OutOfRangeLabelsAreCaughtWithRecord) {
  ScratchDir dir;
  DatasetSpec spec = npy_spec(dir, {}, {0, 1, 2, 3, 1, -1});
  std::string message = error_of([&] { load_dataset(spec); });
  EXPECT_THAT(message, HasSubstr("label_set"));
  EXPECT_THAT(message,
              HasSubstr("train_y.npy' record 3 has label 3; expected an integer in [0, 3)"));
  EXPECT_THAT(message, HasSubstr("first records [3, 5]"));
}

TEST(LoadDataset, TooFewExamplesPerClass) {
  ScratchDir dir;
  DatasetSpec spec = npy_spec(dir, {}, {0, 0, 0, 0, 1, 1});
  spec.labels.min_per_class = 2;
  std::string message = error_of([&] { load_dataset(spec); });
  EXPECT_THAT(message, HasSubstr("class 2 has 0 valid examples, the contract says at least 2"));
  spec.labels.min_per_class = 0;
  EXPECT_THAT(load_dataset(spec).train_report.class_histogram, ElementsAre(4, 2, 0));
}

TEST(LoadDataset, CountMismatchNamesBothFiles) {
  ScratchDir dir;
  DatasetSpec spec = npy_spec(dir);
  write_npy_labels(dir / "train_y.npy", {0, 1, 2, 0, 1});
  std::string message = error_of([&] { load_dataset(spec); });
  EXPECT_THAT(message, HasSubstr("6 records in '"));
  EXPECT_THAT(message, HasSubstr("train_x.npy' but 5 labels in '"));
}

TEST(LoadDataset, TruncatedFilesNameTheFile) {
  ScratchDir dir;
  DatasetSpec spec = npy_spec(dir);
  Bytes bytes = npy_bytes(npy_dict("<f4", "(6, 2)"), bytes_of(std::vector<float>(11, 1.0f)));
  write_bytes(dir / "train_x.npy", bytes);
  EXPECT_TRUE(fails_with([&] { load_dataset(spec); }, {"train_x.npy", "truncated"}));

  DatasetSpec idx;
  idx.kind = "idx";
  idx.train_features = (dir / "images.gz").string();
  idx.train_labels = (dir / "labels").string();
  idx.test_features = idx.train_features;
  idx.test_labels = idx.train_labels;
  idx.labels.num_classes = 10;
  Bytes images = idx_bytes({4, 2, 2}, iota_bytes(16));
  images.resize(images.size() - 3);
  write_bytes(dir / "images.gz", gzip_bytes(images));
  write_bytes(dir / "labels", idx_bytes({4}, iota_bytes(4, 10)));
  EXPECT_TRUE(fails_with([&] { load_dataset(idx); }, {"images.gz", "truncated"}));
}

// Fashion-MNIST's layout: u8 images [n,28,28] and labels, with the default contract.
void write_fashion(const fs::path& dir, uint32_t train, uint32_t test, uint32_t train_labels) {
  write_bytes(dir / "train-images-idx3-ubyte.gz",
              gzip_bytes(idx_bytes({train, 28, 28}, iota_bytes(train * 784))));
  write_bytes(dir / "train-labels-idx1-ubyte.gz",
              gzip_bytes(idx_bytes({train_labels}, iota_bytes(train_labels, 10))));
  write_bytes(dir / "t10k-images-idx3-ubyte", idx_bytes({test, 28, 28}, iota_bytes(test * 784)));
  write_bytes(dir / "t10k-labels-idx1-ubyte", idx_bytes({test}, iota_bytes(test, 10)));
}

TEST(LoadDataset, FashionMnistLayoutWithDefaults) {
  ScratchDir dir;
  write_fashion(dir.path(), 12, 5, 12);
  DatasetSpec spec;
  spec.dir = dir.path().string();
  Dataset dataset = load_dataset(spec);
  EXPECT_EQ(dataset.num_classes, 10);
  EXPECT_THAT(dataset.record_shape, ElementsAre(28, 28));
  EXPECT_EQ(dataset.train.features.dtype, DType::u8);
  EXPECT_EQ(dataset.normalize, "divide_255");
  EXPECT_FLOAT_EQ(dataset.scale.at(0), 1.0f / 255.0f);
  spec.train_limit = 4;
  EXPECT_EQ(load_dataset(spec).train.size(), 4);
}

TEST(LoadDataset, ImageLabelCountMismatch) {
  ScratchDir dir;
  write_fashion(dir.path(), 12, 5, 11);
  DatasetSpec spec;
  spec.dir = dir.path().string();
  std::string message = error_of([&] { load_dataset(spec); });
  EXPECT_THAT(message, HasSubstr("12 records in '"));
  EXPECT_THAT(message, HasSubstr("train-images-idx3-ubyte.gz' but 11 labels in '"));
  // Also when a limit means fewer are read: the files disagree.
  spec.train_limit = 3;
  EXPECT_THAT(error_of([&] { load_dataset(spec); }), HasSubstr("but 11 labels"));
}

TEST(LoadDataset, MissingFashionFilesGiveTheInstallHint) {
  ScratchDir dir;
  DatasetSpec spec;
  spec.dir = (dir / "nowhere").string();
  EXPECT_TRUE(fails_with([&] { load_dataset(spec); },
                         {"train-images-idx3-ubyte.gz' does not exist", "dataset-fashion-mnist"}));
}

DatasetSpec csv_spec(const fs::path& file) {
  DatasetSpec spec;
  spec.kind = "csv";
  spec.train_file = file.string();
  spec.feature_columns = {"a", "b"};
  spec.label_column = "kind";
  spec.label_names = {"cat", "dog"};
  spec.test_fraction = 0.25;
  return spec;
}

TEST(LoadDataset, CsvWithTextLabelsAndATestFraction) {
  ScratchDir dir;
  auto file = write_text(dir, "t.csv",
                         "id,a,b,kind\n1,1,10,cat\n2,2,20,dog\n3,3,30,cat\n4,4,40,dog\n"
                         "5,5,50,dog\n6,6,60,cat\n7,7,70,dog\n8,8,80,cat\n");
  Dataset dataset = load_dataset(csv_spec(file));
  EXPECT_EQ(dataset.num_classes, 2);
  EXPECT_EQ(dataset.train.size(), 6);
  EXPECT_EQ(dataset.test.size(), 2);
  EXPECT_THAT(dataset.test.labels, ElementsAre(1, 0));
  EXPECT_THAT(dataset.record_shape, ElementsAre(2));
  EXPECT_EQ(dataset.normalize, "standardize");
  // Standardised with the training split's mean 3.5 and deviation sqrt(35/12).
  double deviation = std::sqrt(35.0 / 12.0);
  EXPECT_NEAR(dataset.scale[0], 1 / deviation, 1e-6);
  EXPECT_NEAR(dataset.offset[0], -3.5 / deviation, 1e-6);
}

TEST(LoadDataset, MalformedCsvRowsAndCellsNameRecordAndLine) {
  ScratchDir dir;
  auto file = write_text(dir, "bad.csv",
                         "id,a,b,kind\n1,1,10,cat\n2,2,dog\n3,,30,cat\n4,4,x,dog\n5,5,50,bird\n"
                         "6,6,60,cat\n7,7,70,dog\n8,8,80,cat\n");
  DatasetSpec spec = csv_spec(file);
  std::string message = error_of([&] { load_dataset(spec); });
  EXPECT_THAT(message, HasSubstr("bad.csv' line 3 (record 1): 3 fields, the header has 4"));
  EXPECT_THAT(message,
              HasSubstr("bad.csv' line 4 (record 2), column 'a': \"\" is a missing value"));
  EXPECT_THAT(message, HasSubstr("line 5 (record 3), column 'b': \"x\" is not a number"));
  EXPECT_THAT(message, HasSubstr("line 6 (record 4), column 'kind': label \"bird\" is not one of"));
  spec.on_violation = "drop";
  Dataset dataset = load_dataset(spec);
  EXPECT_EQ(dataset.dropped_train, 4);
  EXPECT_EQ(dataset.train.size(), 2);
  // A limit that stops before the first bad record leaves nothing to report.
  spec.on_violation = "error";
  spec.train_limit = 1;
  EXPECT_EQ(load_dataset(spec).train.size(), 1);
  spec.train_limit = 0;
  spec.on_violation = "drop";
  Dataset reported = load_dataset(spec, ViolationPolicy::kReport);
  EXPECT_EQ(reported.train.size(), 6);
  EXPECT_EQ(reported.train_report.bad_record_count(), 4);
  EXPECT_EQ(reported.train_report.violations.size(), 4u);
}

// A file sorted by class: the last fifth would hold one class only; a shuffled split takes
// a fifth of every part of the file, keeps file order in each split, and depends only on
// split_seed.
TEST(LoadDataset, ShuffledCsvSplitOfAHeaderlessFile) {
  ScratchDir dir;
  std::string text = "40,1,x,y\n";
  for (int i = 0; i < 40; ++i) text += fmt::format("{},{}\n", i, i < 20 ? 0 : 1);
  auto file = write_text(dir, "sorted.csv", text);
  DatasetSpec spec;
  spec.kind = "csv";
  spec.train_file = file.string();
  spec.skip_lines = 1;
  spec.header = false;
  spec.label_column = "1";
  spec.labels.num_classes = 2;
  spec.test_fraction = 0.25;
  Dataset last = load_dataset(spec);
  EXPECT_THAT(last.test_report.class_histogram, ElementsAre(0, 10));
  spec.test_split = "shuffled";
  Dataset shuffled = load_dataset(spec);
  EXPECT_EQ(shuffled.test.size(), 10);
  EXPECT_GT(shuffled.test_report.class_histogram[0], 0);
  EXPECT_GT(shuffled.test_report.class_histogram[1], 0);
  // Every record in exactly one split, each split in file order.
  std::vector<double> values;
  for (const Split* split : {&shuffled.train, &shuffled.test}) {
    std::vector<double> part;
    for (int64_t r = 0; r < split->size(); ++r) part.push_back(split->features.element(r));
    EXPECT_TRUE(std::is_sorted(part.begin(), part.end()));
    values.insert(values.end(), part.begin(), part.end());
  }
  std::sort(values.begin(), values.end());
  for (int i = 0; i < 40; ++i) EXPECT_EQ(values[static_cast<size_t>(i)], i);
  EXPECT_NE(shuffled.identity, last.identity);
  spec.split_seed = 1;
  Dataset other = load_dataset(spec);
  EXPECT_NE(other.test.features.bytes, shuffled.test.features.bytes);
  EXPECT_NE(other.identity, shuffled.identity);
}

// Violations in a split that is not the file's start name the file's record and line.
TEST(LoadDataset, TestSplitViolationsNameTheFilesRecord) {
  ScratchDir dir;
  auto file = write_text(dir, "tail.csv", "a,b,kind\n1,1,cat\n2,2,dog\n3,3,cat\n4,nan,dog\n");
  DatasetSpec spec = csv_spec(file);
  std::string message = error_of([&] { load_dataset(spec); });
  EXPECT_THAT(message, HasSubstr("test split violates its contract"));
  EXPECT_THAT(message, HasSubstr("line 5 (record 3), column 'b'"));
  EXPECT_THAT(message, HasSubstr("first records [3]"));
}

TEST(LoadDataset, IdentityFollowsContentsContractAndPreprocessing) {
  ScratchDir dir, copy;
  DatasetSpec spec = npy_spec(dir);
  std::string identity = load_dataset(spec).identity;
  // The same bytes elsewhere: the same dataset.
  DatasetSpec moved = npy_spec(copy);
  EXPECT_EQ(load_dataset(moved).identity, identity);
  // One value changed.
  DatasetSpec changed = npy_spec(copy, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12});
  EXPECT_NE(load_dataset(changed).identity, identity);
  DatasetSpec contract = npy_spec(dir);
  contract.features.max = 100;
  EXPECT_NE(load_dataset(contract).identity, identity);
  DatasetSpec preprocessing = npy_spec(dir);
  preprocessing.normalize = "standardize";
  EXPECT_NE(load_dataset(preprocessing).identity, identity);
}

TEST(LoadDataset, RefusesSpecsItCannotRead) {
  ScratchDir dir;
  DatasetSpec spec = npy_spec(dir);
  spec.labels.num_classes = 0;
  EXPECT_TRUE(fails_with([&] { load_dataset(spec); }, {"data.label.num_classes is not set"}));
  spec = npy_spec(dir);
  spec.test_labels = "";
  EXPECT_TRUE(fails_with([&] { load_dataset(spec); }, {"data.test_labels is not set"}));
  DatasetSpec csv = csv_spec(write_text(dir, "one.csv", "a,b,kind\n1,2,cat\n"));
  EXPECT_TRUE(fails_with([&] { load_dataset(csv); }, {"leaves 0 test and 1 training records"}));
}

}  // namespace
}  // namespace kiln::data
