// A dataset from its sources, checked against its contracts: for classification
// (Fashion-MNIST, IDX or NPY file pairs, a CSV file) one label per record; for language
// modelling (a text file read as bytes, a token file) a window of tokens per record whose
// labels are the tokens that follow each position (token_dataset.h). Each comes with its identity:
// the SHA-256 over the source files' bytes, the contracts and the preprocessing. The trainer and
// `kiln data validate` both load through here, so they check the same things.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "data/contract.h"
#include "data/raw_array.h"

namespace kiln::data {

struct DatasetSpec {
  std::string kind = "fashion_mnist";  // fashion_mnist, idx, npy, csv, text, tokens
  std::string dir;                     // fashion_mnist: the directory of its four files
  // idx, npy: features and labels of each split.
  std::string train_features, train_labels, test_features, test_labels;
  // csv: the file(s), the columns, and how the test split is formed when there is no
  // test file: test_fraction of the records, the last ones in file order or a shuffled
  // choice; each split keeps file order.
  // text, tokens: the corpus (a text file, or a token file) and, optionally, the test one.
  std::string train_file, test_file;
  int64_t context = 0;  // text, tokens: tokens per record (the model's input length)
  double test_fraction = 0.2;
  std::string test_split = "last";  // last, shuffled (by split_seed)
  uint64_t split_seed = 0;
  bool header = true;  // false: columns are named "0", "1", ...
  int64_t skip_lines = 0;
  std::vector<std::string> feature_columns;  // empty: every column but the label
  std::string label_column = "label";
  std::vector<std::string> label_names;  // CSV labels given as text: class i is names[i]
  int64_t train_limit = 0;               // only the first N records (0: all)
  int64_t test_limit = 0;
  FeatureContract features;
  LabelContract labels;
  std::string on_violation = "error";  // error, drop
  // none, divide_255, standardize (per element, with the training split's mean and
  // standard deviation), auto (divide_255 for u8 features, standardize for csv, else none)
  std::string normalize = "auto";
};

// Features as stored (the source's dtype), and how a batch turns them into f32:
// value * scale[i] + offset[i], i the element within the record (or scale[0] for all).
struct Split {
  RawArray features;            // kept records only
  std::vector<int32_t> labels;  // class indices, labels_per_record per record
  int64_t labels_per_record = 1;
  int64_t size() const { return static_cast<int64_t>(labels.size()) / labels_per_record; }
};

struct SourceFile {
  std::string role;  // train_features, test_labels, train_file, ...
  std::string path;
  std::string sha256;
};

// Where load_dataset's time went (the startup breakdown of run.json's timing).
struct DatasetLoadTimes {
  double read_seconds = 0;    // reading (and decompressing) both splits
  double checks_seconds = 0;  // the contracts and the records they drop
  // Waiting for the source files' SHA-256 once the rest was done (they are hashed while
  // the splits are read).
  double identity_seconds = 0;
};

struct Dataset {
  Split train;
  Split test;
  int64_t num_classes = 0;
  std::vector<int64_t> record_shape;  // features per record
  // csv: the columns the features were read from, in the model's order (by name, or by
  // position "0", "1", ... in a file without a header).
  std::vector<std::string> feature_columns;
  // What the model receives: f32 features, or i32 token ids (text, tokens).
  DType input_dtype = DType::f32;
  std::vector<float> scale{1.0f};
  std::vector<float> offset{0.0f};
  std::string normalize;  // the mode resolved from "auto"
  ValidationReport train_report;
  ValidationReport test_report;
  int64_t dropped_train = 0;
  int64_t dropped_test = 0;
  std::vector<SourceFile> files;
  std::string identity;  // hex SHA-256
  DatasetLoadTimes load_times;

  // For run.json: identity, files, contracts' outcome, drops.
  nlohmann::json to_json() const;
};

enum class ViolationPolicy {
  kFromSpec,  // spec.on_violation: "error" throws with the reports, "drop" drops records
  kReport,    // keep every record, return the reports (kiln data validate)
};

// Reads, validates and preprocesses. Errors that make the data unreadable (a missing or
// corrupt file, a bad spec) are kiln::Errors naming the file; violations of the contracts
// follow `policy`. With kFromSpec, violations that dropping cannot repair (dtype, shape,
// record counts, too few per class) are errors even with on_violation = "drop".
Dataset load_dataset(const DatasetSpec& spec, ViolationPolicy policy = ViolationPolicy::kFromSpec);

}  // namespace kiln::data
