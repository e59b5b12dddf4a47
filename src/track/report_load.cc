// Reading a run directory for `kiln report` (report.h): run.json, config.toml and
// metrics.jsonl, with errors that name the file and the line.
#include <cmath>
#include <optional>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "io/bounded_read.h"
#include "kiln/error.h"
#include "track/report.h"

namespace kiln::track {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json read_run_json(const fs::path& run_dir) {
  fs::path path = run_dir / "run.json";
  std::optional<std::string> text = io::read_regular_file_if_present(path, io::kMaxRecordBytes);
  if (!text) {
    std::error_code error;
    fail(kUnknownSite,
         fs::is_directory(run_dir, error)
             ? fmt::format("{} is not a run directory: it has no run.json", run_dir.string())
             : fmt::format("no run directory at {}", run_dir.string()),
         "RUN is a run directory, <runs_dir>/<experiment>/<run-id> (`kiln runs list` shows "
         "them)");
  }
  json info = io::parse_json(*text, path.string());
  if (!info.is_object()) {
    fail(kUnknownSite, fmt::format("{}:1: not a run record (a JSON object)", path.string()));
  }
  return info;
}

// A metric value as metrics.jsonl writes it: a number, or "nan" / "inf" / "-inf" as text.
std::optional<double> metric_value(const json& value) {
  if (value.is_number()) return value.get<double>();
  if (!value.is_string()) return std::nullopt;
  const std::string& text = value.get_ref<const std::string&>();
  if (text == "nan" || text == "-nan") return NAN;
  if (text == "inf") return INFINITY;
  if (text == "-inf") return -INFINITY;
  return std::nullopt;
}

MetricRecord metric_record(const json& line, const std::string& where) {
  MetricRecord record;
  if (line.contains("kind") && line["kind"].is_string()) record.kind = line["kind"];
  bool drawn = record.kind == "train" || record.kind == "eval";
  if (line.contains("step") && line["step"].is_number_integer()) {
    record.step = line["step"].get<int64_t>();
  } else if (drawn) {
    fail(kUnknownSite,
         fmt::format("{}: a \"{}\" record without an integer \"step\"", where, record.kind));
  }
  if (line.contains("epoch") && line["epoch"].is_number_integer()) {
    record.epoch = line["epoch"].get<int64_t>();
  }
  for (const auto& [name, value] : line.items()) {
    if (name == "kind" || name == "step" || name == "epoch") continue;
    if (std::optional<double> number = metric_value(value)) record.values[name] = *number;
  }
  return record;
}

void read_metrics(const fs::path& run_dir, RunData& run) {
  fs::path path = run_dir / "metrics.jsonl";
  std::optional<std::string> text = io::read_regular_file_if_present(path, io::kMaxMetricsBytes);
  if (!text) return;
  std::istringstream in(*text);
  int64_t number = 0;
  int64_t torn = 0;  // a line that is not JSON: acceptable only as the last one
  for (std::string line; std::getline(in, line);) {
    ++number;
    if (line.empty()) continue;
    if (torn) {
      fail(kUnknownSite, fmt::format("{}:{}: not a JSON record", path.string(), torn),
           "only the last line may be torn (a run that crashed mid-write); fix or remove it");
    }
    std::optional<json> parsed = io::parse_json_if_valid(line);
    if (!parsed) {
      torn = number;
      continue;
    }
    const json& record = *parsed;
    std::string where = fmt::format("{}:{}", path.string(), number);
    if (!record.is_object()) fail(kUnknownSite, where + ": not a metrics record (a JSON object)");
    run.metrics.push_back(metric_record(record, where));
  }
  run.torn_last_line = torn != 0;
}

}  // namespace

std::string RunData::key() const {
  auto text = [&](const char* name) {
    auto found = info.find(name);
    return found != info.end() && found->is_string() ? found->get<std::string>() : "?";
  };
  return text("experiment") + "/" + text("run_id");
}

RunData load_run_data(const fs::path& run_dir) {
  RunData run;
  run.info = read_run_json(run_dir);
  run.config_toml =
      io::read_regular_file_if_present(run_dir / "config.toml", io::kMaxRecordBytes).value_or("");
  read_metrics(run_dir, run);
  return run;
}

}  // namespace kiln::track
