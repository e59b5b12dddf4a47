// Checking contracts and writing the report (contract.h).
#include "data/contract.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "kiln/shape.h"

namespace kiln::data {

std::string_view rule_name(Rule rule) {
  switch (rule) {
    case Rule::kMalformedRow:
      return "malformed_row";
    case Rule::kMissingValue:
      return "missing_value";
    case Rule::kNotANumber:
      return "not_a_number";
    case Rule::kCountMismatch:
      return "count_mismatch";
    case Rule::kDtype:
      return "dtype";
    case Rule::kShape:
      return "shape";
    case Rule::kNonFinite:
      return "finite";
    case Rule::kBelowMin:
      return "min";
    case Rule::kAboveMax:
      return "max";
    case Rule::kUnknownLabel:
      return "label_set";
    case Rule::kTooFewPerClass:
      return "min_per_class";
    case Rule::kEmpty:
      return "empty";
  }
  return "unknown";
}

bool is_record_rule(Rule rule) {
  switch (rule) {
    case Rule::kCountMismatch:
    case Rule::kDtype:
    case Rule::kShape:
    case Rule::kTooFewPerClass:
    case Rule::kEmpty:
      return false;
    default:
      return true;
  }
}

int64_t ValidationReport::violation_count() const {
  int64_t total = 0;
  for (const RuleViolations& rule : violations) total += rule.count;
  return total;
}

int64_t ValidationReport::bad_record_count() const {
  int64_t total = 0;
  for (uint8_t bad : bad_records) total += bad;
  return total;
}

nlohmann::json ValidationReport::to_json() const {
  nlohmann::json rules = nlohmann::json::object();
  for (const RuleViolations& rule : violations) {
    rules[std::string(rule_name(rule.rule))] = {
        {"count", rule.count}, {"first_records", rule.first_records}, {"first", rule.detail}};
  }
  return {{"records_read", records_read},
          {"violations", rules},
          {"bad_records", bad_record_count()},
          {"class_histogram", class_histogram}};
}

std::string ValidationReport::to_text() const {
  std::string text = fmt::format("{}: {} records read, ", split, records_read);
  text += violations.empty()
              ? "no violations\n"
              : fmt::format("{} violations in {} records\n", violation_count(), bad_record_count());
  for (const RuleViolations& rule : violations) {
    text += fmt::format("  {:<15} {:>8}  first records [{}]\n      {}\n", rule_name(rule.rule),
                        rule.count, fmt::join(rule.first_records, ", "), rule.detail);
  }
  if (!class_histogram.empty()) {
    text += fmt::format("  classes: [{}]\n", fmt::join(class_histogram, ", "));
  }
  return text;
}

Validator::Validator(std::string split, int64_t records, std::vector<int64_t> source_records)
    : by_rule_(kNumRules), source_records_(std::move(source_records)) {
  report_.split = std::move(split);
  report_.records_read = records;
  report_.bad_records.assign(static_cast<size_t>(records), 0);
  for (int i = 0; i < kNumRules; ++i) by_rule_[static_cast<size_t>(i)].rule = static_cast<Rule>(i);
}

int64_t Validator::source(int64_t record) const {
  bool mapped = record >= 0 && static_cast<size_t>(record) < source_records_.size();
  return mapped ? source_records_[static_cast<size_t>(record)] : record;
}

void Validator::flag(Rule rule, int64_t record, const std::string& detail) {
  RuleViolations& entry = by_rule_[static_cast<size_t>(rule)];
  if (entry.count == 0) entry.detail = detail;
  ++entry.count;
  if (record >= 0 && entry.first_records.size() < kFirstRecords) {
    entry.first_records.push_back(source(record));
  }
  if (!is_record_rule(rule) || record < 0) {
    report_.split_level_violation = true;
  } else if (static_cast<size_t>(record) < report_.bad_records.size()) {
    report_.bad_records[static_cast<size_t>(record)] = 1;
  }
}

void Validator::check_features(const RawArray& features, const FeatureContract& contract) {
  if (contract.dtype && *contract.dtype != features.dtype) {
    flag(Rule::kDtype, -1,
         fmt::format("'{}' holds {}, the contract says {}", features.file,
                     dtype_name(features.dtype), dtype_name(*contract.dtype)));
  }
  std::vector<int64_t> record_shape(features.shape.begin() + (features.shape.empty() ? 0 : 1),
                                    features.shape.end());
  if (features.shape.empty() || (!contract.shape.empty() && record_shape != contract.shape)) {
    flag(Rule::kShape, -1,
         fmt::format("'{}' holds records of shape {} (array {}), the contract says {}",
                     features.file, dims_to_string(record_shape), dims_to_string(features.shape),
                     dims_to_string(contract.shape)));
    return;
  }
  bool check_range = contract.min > -INFINITY || contract.max < INFINITY;
  // Integers are always finite: without a range there is nothing to check per element.
  bool check_finite = contract.finite && is_floating(features.dtype);
  if (!check_finite && !check_range) return;
  int64_t size = features.record_size();
  auto known = static_cast<int64_t>(report_.bad_records.size());
  for (int64_t record = 0; record < std::min(features.records(), known); ++record) {
    // A record already flagged while reading (a missing cell read as NaN) is not reported
    // again for the same value.
    if (report_.bad_records[static_cast<size_t>(record)]) continue;
    bool nonfinite = false, below = false, above = false;
    int64_t first_bad = -1;
    double first_value = 0;
    for (int64_t i = 0; i < size; ++i) {
      double value = features.element(record * size + i);
      bool bad_finite = check_finite && !std::isfinite(value);
      bool bad_min = value < contract.min;
      bool bad_max = value > contract.max;
      if ((bad_finite || bad_min || bad_max) && first_bad < 0) {
        first_bad = i;
        first_value = value;
      }
      nonfinite |= bad_finite;
      below |= bad_min;
      above |= bad_max;
    }
    if (first_bad < 0) continue;
    std::string where = fmt::format("'{}' record {} element {} is {}", features.file,
                                    source(record), first_bad, first_value);
    if (nonfinite) flag(Rule::kNonFinite, record, where + "; the contract says finite");
    if (below) flag(Rule::kBelowMin, record, fmt::format("{}; min is {}", where, contract.min));
    if (above) flag(Rule::kAboveMax, record, fmt::format("{}; max is {}", where, contract.max));
  }
}

std::vector<int32_t> Validator::check_labels(const RawArray& labels,
                                             const LabelContract& contract) {
  std::vector<int32_t> classes(static_cast<size_t>(labels.records()), -1);
  if (labels.record_size() != 1) {
    flag(Rule::kShape, -1,
         fmt::format("'{}' holds labels of shape {}, expected one label per record ([n])",
                     labels.file, dims_to_string(labels.shape)));
    return classes;
  }
  for (int64_t record = 0; record < labels.records(); ++record) {
    double value = labels.element(record);
    if (std::isnan(value)) continue;  // already reported as missing or not a number
    if (value != std::floor(value) || value < 0 ||
        value >= static_cast<double>(contract.num_classes)) {
      flag(Rule::kUnknownLabel, record,
           fmt::format("'{}' record {} has label {}; expected an integer in [0, {})", labels.file,
                       record, value, contract.num_classes));
      continue;
    }
    classes[static_cast<size_t>(record)] = static_cast<int32_t>(value);
  }
  return classes;
}

void Validator::check_class_counts(const std::vector<int32_t>& classes,
                                   const LabelContract& contract) {
  report_.class_histogram.assign(static_cast<size_t>(std::max<int64_t>(contract.num_classes, 0)),
                                 0);
  for (size_t record = 0; record < classes.size(); ++record) {
    if (classes[record] >= 0 && !report_.bad_records[record]) {
      ++report_.class_histogram[static_cast<size_t>(classes[record])];
    }
  }
  for (size_t label = 0; label < report_.class_histogram.size(); ++label) {
    int64_t count = report_.class_histogram[label];
    if (count < contract.min_per_class) {
      flag(Rule::kTooFewPerClass, -1,
           fmt::format("class {} has {} valid examples, the contract says at least {}", label,
                       count, contract.min_per_class));
    }
  }
}

ValidationReport Validator::finish() {
  for (RuleViolations& entry : by_rule_) {
    if (entry.count > 0) report_.violations.push_back(std::move(entry));
  }
  return std::move(report_);
}

}  // namespace kiln::data
