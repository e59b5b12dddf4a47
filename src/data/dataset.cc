// Loading a dataset (dataset.h): sources -> raw arrays -> contracts -> drops ->
// preprocessing -> identity. Record indices in every message are the source's own (the
// n-th record of the file, 0-based), also after a limit or a drop.
#include "data/dataset.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <future>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "data/csv.h"
#include "data/idx.h"
#include "data/npy.h"
#include "data/sampler.h"
#include "data/token_dataset.h"
#include "io/sha256.h"
#include "kiln/error.h"
#include "kiln/shape.h"

namespace kiln::data {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kFashionHint =
    "install the Debian package dataset-fashion-mnist (scripts/setup does), or set data.dir "
    "to a directory holding the four files";

// A split as read, before the contracts: features, labels and what reading found.
struct RawSplit {
  RawArray features;
  RawArray labels;
  int64_t feature_rows_in_file = 0;
  int64_t label_rows_in_file = 0;
  // Problems found while reading (CSV cells and rows), flagged before the contracts.
  std::vector<std::tuple<Rule, int64_t, std::string>> read_problems;
  // The file's record index of each of the split's records (empty: the same).
  std::vector<int64_t> source_records;
  std::vector<std::string> feature_columns;  // csv: the columns read, in order
};

void keep_first(RawArray& array, int64_t limit) {
  if (limit <= 0 || array.shape.empty() || array.shape[0] <= limit) return;
  array.bytes.resize(static_cast<size_t>(limit * array.record_size() * dtype_size(array.dtype)));
  array.shape[0] = limit;
}

RawArray from_idx(const fs::path& path, int64_t limit, int64_t& rows_in_file) {
  return read_idx_records(path, limit, &rows_in_file);
}

RawArray from_npy(const fs::path& path, int64_t limit, int64_t& rows_in_file) {
  RawArray array = read_npy(path);
  if (array.shape.empty()) {
    fail(kUnknownSite, fmt::format("read_npy: '{}' holds a scalar; expected an array whose first "
                                   "axis indexes records",
                                   path.string()));
  }
  rows_in_file = array.shape[0];
  keep_first(array, limit);
  return array;
}

fs::path fashion_file(const fs::path& dir, std::string_view stem) {
  fs::path gz = dir / fmt::format("{}.gz", stem);
  if (fs::exists(gz)) return gz;
  fs::path plain = dir / stem;
  if (fs::exists(plain)) return plain;
  fail(kUnknownSite,
       fmt::format("data: '{}' does not exist{}", gz.string(),
                   fs::is_directory(dir) ? "" : fmt::format(" (no directory '{}')", dir.string())),
       std::string(kFashionHint));
}

std::vector<double> doubles_of(const RawArray& array) {
  std::vector<double> values(array.bytes.size() / static_cast<size_t>(dtype_size(array.dtype)));
  for (size_t i = 0; i < values.size(); ++i) values[i] = array.element(static_cast<int64_t>(i));
  return values;
}

RawArray f64_array(const std::vector<double>& values, std::vector<int64_t> shape,
                   std::string file) {
  RawArray array{DType::f64, std::move(shape), {}, std::move(file)};
  array.bytes.resize(values.size() * sizeof(double));
  std::memcpy(array.bytes.data(), values.data(), array.bytes.size());
  return array;
}

// The CSV records `members` of `table` (record indices of the file, ascending) as a split.
RawSplit csv_split(const CsvTable& table, const std::vector<int64_t>& members,
                   const DatasetSpec& spec, const CsvOptions& options) {
  size_t label = table.column(spec.label_column);
  std::vector<size_t> columns;
  if (spec.feature_columns.empty()) {
    for (size_t i = 0; i < table.columns.size(); ++i) {
      if (i != label) columns.push_back(i);
    }
  } else {
    for (const std::string& name : spec.feature_columns) columns.push_back(table.column(name));
  }
  RawSplit split;
  for (size_t column : columns) split.feature_columns.push_back(table.columns[column]);
  auto count = static_cast<int64_t>(members.size());
  // Position of each file record in the split (-1: not in it).
  int64_t total = static_cast<int64_t>(table.rows.size() + table.malformed.size());
  std::vector<int64_t> slot(static_cast<size_t>(total), -1);
  for (size_t i = 0; i < members.size(); ++i)
    slot[static_cast<size_t>(members[i])] = static_cast<int64_t>(i);
  split.source_records = members;
  auto nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> features(static_cast<size_t>(count) * columns.size(), nan);
  std::vector<double> labels(static_cast<size_t>(count), nan);
  for (const CsvMalformedRow& row : table.malformed) {
    if (slot[static_cast<size_t>(row.record)] < 0) continue;
    split.read_problems.emplace_back(
        Rule::kMalformedRow, slot[static_cast<size_t>(row.record)],
        fmt::format("'{}' line {} (record {}): {}", table.file, row.line, row.record, row.problem));
  }
  // Rows of the table in the split, and their positions there.
  std::vector<size_t> rows;
  for (size_t row = 0; row < table.rows.size(); ++row) {
    if (slot[static_cast<size_t>(table.records[row])] >= 0) rows.push_back(row);
  }
  auto position = [&](size_t part_row) {
    return slot[static_cast<size_t>(table.records[rows[part_row]])];
  };
  CsvTable part;
  part.file = table.file;
  part.columns = table.columns;
  for (size_t row : rows) part.rows.push_back(table.rows[row]);
  auto where = [&](size_t part_row, size_t column) {
    size_t row = rows[part_row];
    return fmt::format("'{}' line {} (record {}), column '{}'", table.file, table.lines[row],
                       table.records[row], table.columns[column]);
  };
  for (size_t c = 0; c < columns.size(); ++c) {
    std::vector<CsvCellProblem> problems;
    std::vector<double> values = numeric_column(part, columns[c], options, problems);
    for (size_t row = 0; row < rows.size(); ++row) {
      auto record = static_cast<size_t>(position(row));
      features[record * columns.size() + c] = values[row];
    }
    for (const CsvCellProblem& problem : problems) {
      split.read_problems.emplace_back(
          problem.missing ? Rule::kMissingValue : Rule::kNotANumber, position(problem.row),
          fmt::format("{}: {:?} is {}", where(problem.row, columns[c]), problem.text,
                      problem.missing ? "a missing value" : "not a number"));
    }
  }
  if (spec.label_names.empty()) {
    std::vector<CsvCellProblem> problems;
    std::vector<double> values = numeric_column(part, label, options, problems);
    for (size_t row = 0; row < rows.size(); ++row) {
      labels[static_cast<size_t>(position(row))] = values[row];
    }
    for (const CsvCellProblem& problem : problems) {
      split.read_problems.emplace_back(
          problem.missing ? Rule::kMissingValue : Rule::kNotANumber, position(problem.row),
          fmt::format("{}: label {:?} is {}", where(problem.row, label), problem.text,
                      problem.missing ? "missing" : "not a number"));
    }
  } else {
    for (size_t row = 0; row < rows.size(); ++row) {
      std::string_view text = part.rows[row][label];
      auto found = std::find(spec.label_names.begin(), spec.label_names.end(), text);
      int64_t record = position(row);
      if (found == spec.label_names.end()) {
        split.read_problems.emplace_back(
            Rule::kUnknownLabel, record,
            fmt::format("{}: label {:?} is not one of data.label_names [{}]", where(row, label),
                        std::string(text), fmt::join(spec.label_names, ", ")));
        continue;
      }
      labels[static_cast<size_t>(record)] = static_cast<double>(found - spec.label_names.begin());
    }
  }
  split.features = f64_array(features, {count, static_cast<int64_t>(columns.size())}, table.file);
  split.labels = f64_array(labels, {count}, table.file);
  split.feature_rows_in_file = split.label_rows_in_file = count;
  return split;
}

std::vector<int64_t> all_records(const CsvTable& table) {
  std::vector<int64_t> records(table.rows.size() + table.malformed.size());
  for (size_t i = 0; i < records.size(); ++i) records[i] = static_cast<int64_t>(i);
  return records;
}

std::pair<RawSplit, RawSplit> read_csv_splits(const DatasetSpec& spec) {
  CsvOptions options;
  options.header = spec.header;
  options.skip_lines = spec.skip_lines;
  CsvTable train = read_csv(spec.train_file, options);
  auto total = static_cast<int64_t>(train.rows.size() + train.malformed.size());
  if (!spec.test_file.empty()) {
    CsvTable test = read_csv(spec.test_file, options);
    return {csv_split(train, all_records(train), spec, options),
            csv_split(test, all_records(test), spec, options)};
  }
  auto test_count =
      static_cast<int64_t>(std::llround(spec.test_fraction * static_cast<double>(total)));
  if (test_count < 1 || test_count >= total) {
    fail(kUnknownSite,
         fmt::format("data.test_fraction = {} of the {} records of '{}' leaves {} test and {} "
                     "training records; each split needs at least one",
                     spec.test_fraction, total, spec.train_file, test_count, total - test_count),
         "set data.test_file, or a test_fraction that leaves both splits non-empty");
  }
  // "last": the file's last records; "shuffled": those a permutation keyed by split_seed
  // puts first (so a file sorted by class still gives a test split of every class).
  std::vector<int64_t> train_records, test_records;
  EpochPermutation order(total, spec.split_seed, 0);
  for (int64_t record = 0; record < total; ++record) {
    bool test =
        spec.test_split == "shuffled" ? order(record) < test_count : record >= total - test_count;
    (test ? test_records : train_records).push_back(record);
  }
  return {csv_split(train, train_records, spec, options),
          csv_split(train, test_records, spec, options)};
}

RawSplit read_pair(const fs::path& features, const fs::path& labels, int64_t limit, bool npy) {
  RawSplit split;
  if (npy) {
    split.features = from_npy(features, limit, split.feature_rows_in_file);
    split.labels = from_npy(labels, limit, split.label_rows_in_file);
  } else {
    split.features = from_idx(features, limit, split.feature_rows_in_file);
    split.labels = from_idx(labels, limit, split.label_rows_in_file);
  }
  return split;
}

void require_path(const std::string& value, std::string_view key, std::string_view kind) {
  if (value.empty()) {
    fail(kUnknownSite,
         fmt::format("data.{} is not set; data.dataset = \"{}\" reads it", key, kind));
  }
}

// The files each split is read from, by role, in a fixed order (for the identity).
std::vector<std::pair<std::string, std::string>> source_files(const DatasetSpec& spec) {
  if (spec.kind == "csv") {
    std::vector<std::pair<std::string, std::string>> files = {{"train_file", spec.train_file}};
    if (!spec.test_file.empty()) files.emplace_back("test_file", spec.test_file);
    return files;
  }
  return {{"train_features", spec.train_features},
          {"train_labels", spec.train_labels},
          {"test_features", spec.test_features},
          {"test_labels", spec.test_labels}};
}

ValidationReport validate_split(const std::string& name, const RawSplit& raw,
                                const DatasetSpec& spec, bool class_counts,
                                std::vector<int32_t>& classes) {
  int64_t records = std::min(raw.features.records(), raw.labels.records());
  Validator validator(name, records, raw.source_records);
  for (const auto& [rule, record, detail] : raw.read_problems) {
    // Records past a limit are not used: their problems are not the run's.
    if (record < records) validator.flag(rule, record, detail);
  }
  if (raw.feature_rows_in_file != raw.label_rows_in_file) {
    validator.flag(Rule::kCountMismatch, -1,
                   fmt::format("{} records in '{}' but {} labels in '{}'", raw.feature_rows_in_file,
                               raw.features.file, raw.label_rows_in_file, raw.labels.file));
  }
  // A split without records: `kiln data validate` reports it as `kiln train` refuses it.
  if (records == 0) {
    validator.flag(Rule::kEmpty, -1,
                   fmt::format("the {} split has no records ('{}')", name, raw.features.file));
  }
  validator.check_features(raw.features, spec.features);
  classes = validator.check_labels(raw.labels, spec.labels);
  classes.resize(static_cast<size_t>(records));
  if (class_counts) {
    validator.check_class_counts(classes, spec.labels);
  } else {
    validator.check_class_counts(classes, LabelContract{spec.labels.num_classes, 0});
  }
  return validator.finish();
}

Split keep_valid(const RawSplit& raw, const std::vector<int32_t>& classes,
                 const ValidationReport& report, bool drop, int64_t& dropped) {
  Split split;
  split.features = raw.features;
  split.features.bytes.clear();
  size_t record_bytes =
      static_cast<size_t>(raw.features.record_size() * dtype_size(raw.features.dtype));
  for (size_t record = 0; record < classes.size(); ++record) {
    if (drop && report.bad_records[record]) {
      ++dropped;
      continue;
    }
    const uint8_t* begin = raw.features.bytes.data() + record * record_bytes;
    split.features.bytes.insert(split.features.bytes.end(), begin, begin + record_bytes);
    split.labels.push_back(classes[record]);
  }
  split.features.shape[0] = split.size();
  return split;
}

void set_preprocessing(const DatasetSpec& spec, Dataset& dataset) {
  std::string mode = spec.normalize;
  if (mode == "auto") {
    mode = dataset.train.features.dtype == DType::u8 ? "divide_255"
           : spec.kind == "csv"                      ? "standardize"
                                                     : "none";
  }
  dataset.normalize = mode;
  if (mode == "divide_255") {
    dataset.scale = {1.0f / 255.0f};
  } else if (mode == "standardize") {
    int64_t size = dataset.train.features.record_size();
    int64_t records = dataset.train.size();
    std::vector<double> values = doubles_of(dataset.train.features);
    dataset.scale.assign(static_cast<size_t>(size), 1.0f);
    dataset.offset.assign(static_cast<size_t>(size), 0.0f);
    for (int64_t i = 0; i < size; ++i) {
      double sum = 0, squares = 0;
      for (int64_t r = 0; r < records; ++r) sum += values[static_cast<size_t>(r * size + i)];
      double mean = records ? sum / static_cast<double>(records) : 0;
      for (int64_t r = 0; r < records; ++r) {
        double d = values[static_cast<size_t>(r * size + i)] - mean;
        squares += d * d;
      }
      double deviation = records ? std::sqrt(squares / static_cast<double>(records)) : 0;
      // A constant column stays centred at 0 rather than dividing by zero.
      double scale = deviation > 0 && std::isfinite(deviation) ? 1.0 / deviation : 1.0;
      dataset.scale[static_cast<size_t>(i)] = static_cast<float>(scale);
      dataset.offset[static_cast<size_t>(i)] = static_cast<float>(-mean * scale);
    }
  }
}

nlohmann::json contract_json(const DatasetSpec& spec) {
  auto bound = [](double value) {
    return std::isfinite(value) ? nlohmann::json(value) : nlohmann::json(fmt::format("{}", value));
  };
  return {
      {"features",
       {{"dtype", spec.features.dtype ? std::string(dtype_name(*spec.features.dtype)) : "any"},
        {"shape", spec.features.shape},
        {"min", bound(spec.features.min)},
        {"max", bound(spec.features.max)},
        {"finite", spec.features.finite}}},
      {"label",
       {{"num_classes", spec.labels.num_classes}, {"min_per_class", spec.labels.min_per_class}}}};
}

std::string identity_of(const DatasetSpec& spec, const Dataset& dataset) {
  nlohmann::json files = nlohmann::json::array();
  for (const SourceFile& file : dataset.files) {
    files.push_back({{"role", file.role}, {"sha256", file.sha256}});
  }
  // Everything that changes which records, in which form, reach the model; not the paths,
  // so that a copy of the same files elsewhere is the same dataset.
  nlohmann::json preprocessing = {{"kind", spec.kind},
                                  {"train_limit", spec.train_limit},
                                  {"test_limit", spec.test_limit},
                                  {"on_violation", spec.on_violation},
                                  {"normalize", dataset.normalize}};
  if (spec.kind == "csv") {
    preprocessing["test_fraction"] = spec.test_file.empty() ? spec.test_fraction : 0.0;
    preprocessing["test_split"] = spec.test_split;
    preprocessing["split_seed"] = spec.split_seed;
    preprocessing["header"] = spec.header;
    preprocessing["skip_lines"] = spec.skip_lines;
    preprocessing["feature_columns"] = spec.feature_columns;
    preprocessing["label_column"] = spec.label_column;
    preprocessing["label_names"] = spec.label_names;
  }
  nlohmann::json identity = {
      {"files", files}, {"contract", contract_json(spec)}, {"preprocessing", preprocessing}};
  return io::sha256_hex(identity.dump());
}

DatasetSpec resolve(const DatasetSpec& given) {
  DatasetSpec spec = given;
  for (auto [name, limit] :
       {std::pair{"train_limit", spec.train_limit}, std::pair{"test_limit", spec.test_limit}}) {
    if (limit < 0) {
      fail(kUnknownSite,
           fmt::format("data.{} must be >= 0 (0 keeps every example), got {}", name, limit));
    }
  }
  if (spec.kind == "fashion_mnist") {
    fs::path dir = spec.dir;
    spec.train_features = fashion_file(dir, "train-images-idx3-ubyte").string();
    spec.train_labels = fashion_file(dir, "train-labels-idx1-ubyte").string();
    spec.test_features = fashion_file(dir, "t10k-images-idx3-ubyte").string();
    spec.test_labels = fashion_file(dir, "t10k-labels-idx1-ubyte").string();
    if (!spec.features.dtype) spec.features.dtype = DType::u8;
    if (spec.features.shape.empty()) spec.features.shape = {28, 28};
    if (spec.labels.num_classes == 0) spec.labels.num_classes = 10;
  } else if (spec.kind == "idx" || spec.kind == "npy") {
    for (const auto& [role, path] : source_files(spec)) require_path(path, role, spec.kind);
  } else if (spec.kind == "csv") {
    require_path(spec.train_file, "train_file", "csv");
    if (spec.labels.num_classes == 0) {
      spec.labels.num_classes = static_cast<int64_t>(spec.label_names.size());
    }
  } else {
    fail(kUnknownSite, fmt::format("data.dataset = \"{}\" is not one of fashion_mnist, idx, npy, "
                                   "csv, text, tokens",
                                   spec.kind));
  }
  if (spec.labels.num_classes < 1) {
    fail(kUnknownSite,
         fmt::format("data.label.num_classes is not set; data.dataset = \"{}\" needs the number "
                     "of classes (labels are integers in [0, num_classes))",
                     spec.kind),
         spec.kind == "csv" ? "set data.label.num_classes, or data.label_names for text labels"
                            : "set data.label.num_classes");
  }
  if (spec.test_split != "last" && spec.test_split != "shuffled") {
    fail(kUnknownSite,
         fmt::format("data.test_split = \"{}\" is not one of last, shuffled", spec.test_split));
  }
  if (spec.on_violation != "error" && spec.on_violation != "drop") {
    fail(kUnknownSite,
         fmt::format("data.on_violation = \"{}\" is not one of error, drop", spec.on_violation));
  }
  return spec;
}

}  // namespace

nlohmann::json Dataset::to_json() const {
  nlohmann::json sources = nlohmann::json::array();
  for (const SourceFile& file : files) {
    sources.push_back({{"role", file.role}, {"path", file.path}, {"sha256", file.sha256}});
  }
  nlohmann::json json = {{"identity", identity},
                         {"files", sources},
                         {"num_classes", num_classes},
                         {"record_shape", record_shape},
                         {"normalize", normalize},
                         {"train_examples", train.size()},
                         {"test_examples", test.size()},
                         {"dropped_train", dropped_train},
                         {"dropped_test", dropped_test},
                         {"train_report", train_report.to_json()},
                         {"test_report", test_report.to_json()}};
  if (input_dtype != DType::f32) json["input_dtype"] = dtype_name(input_dtype);
  if (train.labels_per_record != 1) json["labels_per_record"] = train.labels_per_record;
  return json;
}

Dataset load_dataset(const DatasetSpec& given, ViolationPolicy policy) {
  if (given.kind == "text" || given.kind == "tokens") return load_token_dataset(given, policy);
  DatasetSpec spec = resolve(given);
  using Clock = std::chrono::steady_clock;
  auto since = [](Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
  };
  Clock::time_point start = Clock::now();
  // The files' hashes (the dataset's identity) while the splits are read: on two cores the
  // test split's reader finishes early, and hashing fills the idle core.
  std::vector<std::pair<std::string, std::string>> sources = source_files(spec);
  auto hashes = std::async(std::launch::async, [&sources] {
    std::vector<std::string> sha;
    for (const auto& [role, path] : sources) sha.push_back(io::sha256_file(path));
    return sha;
  });
  std::pair<RawSplit, RawSplit> raw;
  if (spec.kind == "csv") {
    raw = read_csv_splits(spec);
  } else {
    bool npy = spec.kind == "npy";
    // The training split is the larger: read the test split meanwhile.
    auto test = std::async(std::launch::async, [&] {
      return read_pair(spec.test_features, spec.test_labels, spec.test_limit, npy);
    });
    raw.first = read_pair(spec.train_features, spec.train_labels, spec.train_limit, npy);
    raw.second = test.get();
  }
  if (spec.kind == "csv" && spec.train_limit > 0) {
    keep_first(raw.first.features, spec.train_limit);
    keep_first(raw.first.labels, spec.train_limit);
  }
  if (spec.kind == "csv" && spec.test_limit > 0) {
    keep_first(raw.second.features, spec.test_limit);
    keep_first(raw.second.labels, spec.test_limit);
  }
  Dataset dataset;
  dataset.load_times.read_seconds = since(start);
  start = Clock::now();
  dataset.num_classes = spec.labels.num_classes;
  std::vector<int32_t> train_classes, test_classes;
  dataset.train_report = validate_split("train", raw.first, spec, true, train_classes);
  // The test split must look like the training split even where the contract says nothing.
  DatasetSpec test_spec = spec;
  if (!test_spec.features.dtype) test_spec.features.dtype = raw.first.features.dtype;
  if (test_spec.features.shape.empty() && raw.first.features.shape.size() > 1) {
    test_spec.features.shape.assign(raw.first.features.shape.begin() + 1,
                                    raw.first.features.shape.end());
  }
  dataset.test_report = validate_split("test", raw.second, test_spec, false, test_classes);
  if (policy == ViolationPolicy::kFromSpec) {
    bool drop = spec.on_violation == "drop";
    for (const ValidationReport* report : {&dataset.train_report, &dataset.test_report}) {
      bool fatal = drop ? report->split_level_violation : report->violation_count() > 0;
      if (!fatal) continue;
      fail(kUnknownSite,
           fmt::format("data: the {} split violates its contract\n{}", report->split,
                       report->to_text()),
           drop ? "these violations are not about single records, so dropping cannot repair them"
                : "fix the data, or set data.on_violation = \"drop\" to drop the records "
                  "(counted in run.json)");
    }
  }
  bool drop = policy == ViolationPolicy::kFromSpec && spec.on_violation == "drop";
  dataset.train =
      keep_valid(raw.first, train_classes, dataset.train_report, drop, dataset.dropped_train);
  dataset.test =
      keep_valid(raw.second, test_classes, dataset.test_report, drop, dataset.dropped_test);
  if (policy == ViolationPolicy::kFromSpec &&
      (dataset.train.size() == 0 || dataset.test.size() == 0)) {
    fail(kUnknownSite,
         fmt::format("data: {} training and {} test examples remain; each split needs at least "
                     "one",
                     dataset.train.size(), dataset.test.size()),
         spec.kind == "fashion_mnist" ? std::string(kFashionHint) : "");
  }
  const std::vector<int64_t>& shape = dataset.train.features.shape;
  dataset.record_shape.assign(shape.begin() + 1, shape.end());
  dataset.feature_columns = raw.first.feature_columns;
  dataset.load_times.checks_seconds = since(start);
  start = Clock::now();
  std::vector<std::string> sha = hashes.get();
  for (size_t i = 0; i < sources.size(); ++i) {
    dataset.files.push_back({sources[i].first, sources[i].second, sha[i]});
  }
  dataset.load_times.identity_seconds = since(start);
  set_preprocessing(spec, dataset);
  dataset.identity = identity_of(spec, dataset);
  return dataset;
}

}  // namespace kiln::data
