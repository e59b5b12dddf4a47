// Reading a corpus into records of next-token windows (token_dataset.h).
#include "data/token_dataset.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "data/byte_tokenizer.h"
#include "data/token_file.h"
#include "io/bounded_read.h"
#include "io/sha256.h"
#include "kiln/error.h"

namespace kiln::data {
namespace {

// A corpus read whole into memory: far beyond any text this trains on in one process.
constexpr size_t kMaxTextBytes = size_t{1} << 30;

constexpr std::string_view kCorpusHint =
    "scripts/setup writes data/kjv.txt (the King James Bible, Debian package bible-kjv); or "
    "set data.train_file to a text file (dataset = \"text\") or a token file (\"tokens\")";

std::vector<uint16_t> read_corpus(const DatasetSpec& spec, const std::string& path,
                                  const std::string& role) {
  if (path.empty()) {
    fail(kUnknownSite, fmt::format("data.{}: dataset \"{}\" needs a file", role, spec.kind),
         std::string(kCorpusHint));
  }
  if (spec.kind == "tokens") return read_token_file(path, spec.labels.num_classes);
  std::string text;
  try {
    text = io::read_regular_file(path, kMaxTextBytes);
  } catch (const Error& error) {
    fail(kUnknownSite, fmt::format("data.{}: {}", role, error.message()), std::string(kCorpusHint));
  }
  return encode_bytes(text);
}

// Records of `context` tokens from tokens[begin, end), at most `limit` (0: all).
Split cut_records(const std::vector<uint16_t>& tokens, size_t begin, size_t end, int64_t context,
                  int64_t limit) {
  auto length = static_cast<int64_t>(end - begin);
  int64_t records = length > 0 ? (length - 1) / context : 0;
  if (limit > 0) records = std::min(records, limit);
  Split split;
  split.labels_per_record = context;
  split.features.dtype = DType::i32;
  split.features.shape = {records, context};
  split.features.bytes.resize(static_cast<size_t>(records * context) * sizeof(int32_t));
  split.labels.resize(static_cast<size_t>(records * context));
  auto* features = reinterpret_cast<int32_t*>(split.features.bytes.data());
  // Record r holds tokens [r * context, (r + 1) * context) of the range: element i of the
  // whole split is token begin + i, and its label the token after it.
  for (int64_t i = 0; i < records * context; ++i) {
    size_t at = begin + static_cast<size_t>(i);
    features[i] = tokens[at];
    split.labels[static_cast<size_t>(i)] = tokens[at + 1];
  }
  return split;
}

ValidationReport report_of(const std::string& name, const Split& split, int64_t tokens,
                           int64_t context, const std::string& file) {
  Validator validator(name, split.size());
  if (split.size() == 0) {
    validator.flag(Rule::kEmpty, -1,
                   fmt::format("'{}': {} tokens of the {} split, fewer than the {} a record of "
                               "context {} reads",
                               file, tokens, name, context + 1, context));
  }
  return validator.finish();
}

std::string identity_of(const DatasetSpec& spec, const Dataset& dataset) {
  nlohmann::json files = nlohmann::json::array();
  for (const SourceFile& file : dataset.files) {
    files.push_back({{"role", file.role}, {"sha256", file.sha256}});
  }
  nlohmann::json preprocessing = {
      {"kind", spec.kind},
      {"context", spec.context},
      {"vocabulary", dataset.num_classes},
      {"train_limit", spec.train_limit},
      {"test_limit", spec.test_limit},
      {"test_fraction", spec.test_file.empty() ? spec.test_fraction : 0.0}};
  return io::sha256_hex(nlohmann::json{{"files", files}, {"preprocessing", preprocessing}}.dump());
}

}  // namespace

Dataset load_token_dataset(const DatasetSpec& given, ViolationPolicy policy) {
  DatasetSpec spec = given;
  if (spec.context < 1) {
    fail(kUnknownSite,
         fmt::format("data.context must be >= 1 for dataset \"{}\" (tokens per record), got {}",
                     spec.kind, spec.context),
         "set data.context to the model's input length, e.g. 64");
  }
  if (spec.test_split != "last") {
    fail(kUnknownSite,
         fmt::format("data.test_split = \"{}\": a {} dataset's test split is the end of the corpus",
                     spec.test_split, spec.kind),
         "a random choice of records would put neighbouring text in both splits; set "
         "data.test_split = \"last\" or give data.test_file");
  }
  if (spec.kind == "text") {
    if (spec.labels.num_classes == 0) spec.labels.num_classes = kByteVocabularySize;
    if (spec.labels.num_classes < kByteVocabularySize) {
      fail(kUnknownSite,
           fmt::format("data.label.num_classes = {}: a text dataset's tokens are bytes, which "
                       "need a vocabulary of {}",
                       spec.labels.num_classes, kByteVocabularySize));
    }
  } else if (spec.labels.num_classes < 1) {
    fail(kUnknownSite, "data.label.num_classes: a token dataset needs its vocabulary size",
         "set data.label.num_classes, e.g. 50257 for GPT-2's tokenizer");
  }

  std::vector<uint16_t> train_tokens = read_corpus(spec, spec.train_file, "train_file");
  std::vector<uint16_t> test_tokens;
  size_t train_end = train_tokens.size();
  Dataset dataset;
  if (spec.test_file.empty()) {
    auto test_length = static_cast<size_t>(
        std::floor(static_cast<double>(train_tokens.size()) * spec.test_fraction));
    train_end = train_tokens.size() - test_length;
    dataset.test =
        cut_records(train_tokens, train_end, train_tokens.size(), spec.context, spec.test_limit);
  } else {
    test_tokens = read_corpus(spec, spec.test_file, "test_file");
    dataset.test = cut_records(test_tokens, 0, test_tokens.size(), spec.context, spec.test_limit);
  }
  dataset.train = cut_records(train_tokens, 0, train_end, spec.context, spec.train_limit);
  dataset.num_classes = spec.labels.num_classes;
  dataset.record_shape = {spec.context};
  dataset.input_dtype = DType::i32;
  dataset.normalize = "none";
  const std::string& test_source = spec.test_file.empty() ? spec.train_file : spec.test_file;
  dataset.train_report = report_of("train", dataset.train, static_cast<int64_t>(train_end),
                                   spec.context, spec.train_file);
  dataset.test_report =
      report_of("test", dataset.test,
                static_cast<int64_t>(spec.test_file.empty() ? train_tokens.size() - train_end
                                                            : test_tokens.size()),
                spec.context, test_source);
  if (policy == ViolationPolicy::kFromSpec &&
      (dataset.train.size() == 0 || dataset.test.size() == 0)) {
    fail(kUnknownSite,
         fmt::format("data: {} training and {} test records of {} tokens; each split needs at "
                     "least one\n{}{}",
                     dataset.train.size(), dataset.test.size(), spec.context,
                     dataset.train_report.to_text(), dataset.test_report.to_text()),
         "use a longer corpus, a smaller data.context, or a larger data.test_fraction");
  }
  dataset.files.push_back({"train_file", spec.train_file, io::sha256_file(spec.train_file)});
  if (!spec.test_file.empty()) {
    dataset.files.push_back({"test_file", spec.test_file, io::sha256_file(spec.test_file)});
  }
  dataset.identity = identity_of(spec, dataset);
  return dataset;
}

}  // namespace kiln::data
