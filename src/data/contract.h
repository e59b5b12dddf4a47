// Data contracts: what a split's features and labels must satisfy (dtype, per-record
// shape, value range, finiteness, the label set, a minimum of examples per class), and the
// report of checking them: records read, violations grouped by rule with the first record
// indices, the class histogram. Record-level violations mark the record bad (a caller may
// drop it); split-level ones (dtype, shape, counts) cannot be dropped.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "data/raw_array.h"

namespace kiln::data {

struct FeatureContract {
  std::optional<DType> dtype;  // the dtype the source must hold; empty: any
  std::vector<int64_t> shape;  // per record (the source's shape[1:]); empty: any
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  bool finite = true;
};

struct LabelContract {
  int64_t num_classes = 0;  // labels are integers in [0, num_classes)
  int64_t min_per_class = 0;
};

// The rules, in the order a report lists them.
enum class Rule {
  kMalformedRow,   // a CSV row with the wrong number of fields
  kMissingValue,   // an empty or NA cell
  kNotANumber,     // a cell that does not parse as a number
  kCountMismatch,  // features and labels hold different numbers of records
  kDtype,
  kShape,
  kNonFinite,  // NaN or infinity in the features
  kBelowMin,
  kAboveMax,
  kUnknownLabel,    // a label outside the allowed set
  kTooFewPerClass,  // a class with fewer examples than min_per_class
  kEmpty,           // a split without records
};
inline constexpr int kNumRules = 12;
std::string_view rule_name(Rule rule);
// Whether the rule is about single records (so that dropping them repairs the split).
bool is_record_rule(Rule rule);

struct RuleViolations {
  Rule rule = Rule::kNonFinite;
  int64_t count = 0;                   // records (or classes) violating it
  std::vector<int64_t> first_records;  // the first few records (the source's indices)
  std::string detail;                  // the first violation in words, with its file
};

struct ValidationReport {
  std::string split;  // "train" or "test"
  int64_t records_read = 0;
  std::vector<RuleViolations> violations;  // only rules with count > 0, in Rule order
  std::vector<int64_t> class_histogram;    // examples per class (of the valid labels)
  std::vector<uint8_t> bad_records;        // 1: the record violates a record rule
  bool split_level_violation = false;      // a rule that dropping records cannot fix

  int64_t violation_count() const;
  int64_t bad_record_count() const;
  nlohmann::json to_json() const;  // without bad_records
  std::string to_text() const;     // the human report, one block per rule
};

// Collects violations while a split is read and checked.
class Validator {
 public:
  static constexpr size_t kFirstRecords = 10;
  // `source_records`: the source's index of each record, for the report (empty: the same).
  Validator(std::string split, int64_t records, std::vector<int64_t> source_records = {});
  // Records `rule` for `record` (-1: the whole split); `detail` is kept for the first one.
  void flag(Rule rule, int64_t record, const std::string& detail);
  // Checks the features against the contract, record by record.
  void check_features(const RawArray& features, const FeatureContract& contract);
  // Checks the labels (any integer or float dtype; a float must be an integer value) and
  // returns them as class indices (-1 where invalid).
  std::vector<int32_t> check_labels(const RawArray& labels, const LabelContract& contract);
  void check_class_counts(const std::vector<int32_t>& classes, const LabelContract& contract);
  ValidationReport finish();

 private:
  int64_t source(int64_t record) const;
  ValidationReport report_;
  std::vector<RuleViolations> by_rule_;
  std::vector<int64_t> source_records_;
};

}  // namespace kiln::data
