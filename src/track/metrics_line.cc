// metrics.jsonl's codec (metrics_line.h).
#include "track/metrics_line.h"

#include <cmath>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "io/bounded_read.h"
#include "io/json_text.h"
#include "kiln/error.h"

namespace kiln::track {
namespace {

using nlohmann::json;

json number_or_text(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  return value;
}

std::optional<double> non_finite_from_text(const std::string& text) {
  if (text == "nan" || text == "-nan") return NAN;
  if (text == "inf") return INFINITY;
  if (text == "-inf") return -INFINITY;
  return std::nullopt;
}

bool is_list_of_text(const json& value) {
  if (!value.is_array()) return false;
  for (const json& item : value) {
    if (!item.is_string()) return false;
  }
  return true;
}

MetricsLine decode_line(const json& record, const std::string& where) {
  if (!record.is_object()) fail(kUnknownSite, where + ": not a metrics record (a JSON object)");
  MetricsLine line;
  for (const auto& [name, value] : record.items()) {
    if (name == "kind" && value.is_string()) {
      line.kind = value.get<std::string>();
    } else if ((name == "step" || name == "epoch") && value.is_number_integer()) {
      (name == "step" ? line.step : line.epoch) = value.get<int64_t>();
    } else if (name == "time" && value.is_number()) {
      line.time = value.get<double>();
    } else if (value.is_number()) {
      line.values[name] = value.get<double>();
    } else if (value.is_string()) {
      const std::string& text = value.get_ref<const std::string&>();
      if (std::optional<double> number = non_finite_from_text(text)) {
        line.values[name] = *number;
      } else {
        line.texts[name] = text;
      }
    } else if (is_list_of_text(value)) {
      line.lists[name] = value.get<std::vector<std::string>>();
    }
  }
  bool drawn = line.kind == "train" || line.kind == "eval";
  auto step = record.find("step");
  if (drawn && (step == record.end() || !step->is_number_integer())) {
    fail(kUnknownSite,
         fmt::format("{}: a \"{}\" record without an integer \"step\"", where, line.kind));
  }
  return line;
}

}  // namespace

std::string metrics_line_text(const MetricsLine& line) {
  json record = {{"kind", line.kind}, {"step", line.step}, {"epoch", line.epoch}};
  if (line.time) record["time"] = *line.time;
  for (const auto& [name, value] : line.values) record[name] = number_or_text(value);
  for (const auto& [name, text] : line.texts) record[name] = text;
  for (const auto& [name, items] : line.lists) record[name] = items;
  return io::json_text(record);
}

MetricsFile parse_metrics_lines(std::string_view text, const std::string& where) {
  MetricsFile file;
  std::istringstream in{std::string(text)};
  int64_t number = 0;
  int64_t torn = 0;  // a line that is not JSON: acceptable only as the last one
  for (std::string line; std::getline(in, line);) {
    ++number;
    if (line.empty()) continue;
    if (torn) {
      fail(kUnknownSite, fmt::format("{}:{}: not a JSON record", where, torn),
           "only the last line may be torn (a run that crashed mid-write); fix or remove it");
    }
    std::optional<json> parsed = io::parse_json_if_valid(line);
    if (!parsed) {
      torn = number;
      continue;
    }
    file.lines.push_back(decode_line(*parsed, fmt::format("{}:{}", where, number)));
  }
  file.torn_last_line = torn != 0;
  return file;
}

MetricsFile read_metrics_file(const std::filesystem::path& run_dir) {
  std::filesystem::path path = run_dir / "metrics.jsonl";
  std::optional<std::string> text = io::read_regular_file_if_present(path, io::kMaxMetricsBytes);
  return text ? parse_metrics_lines(*text, path.string()) : MetricsFile{};
}

std::vector<MetricPoint> metric_points(const MetricsLine& line) {
  std::vector<MetricPoint> points;
  // The numbers of a step, an evaluation and [telemetry]'s per-layer statistics
  // ("telemetry/dense_1/grad_norm"); a skipped step's line is an event, not a series.
  if (line.kind != "train" && line.kind != "eval" && line.kind != "telemetry") return points;
  for (const auto& [name, value] : line.values) {
    points.push_back(
        {fmt::format("{}/{}", line.kind, name), line.step, value, line.time.value_or(0)});
  }
  return points;
}

}  // namespace kiln::track
