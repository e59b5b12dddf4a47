// Reading a run directory for `kiln report` (report.h): run.json, config.toml and
// metrics.jsonl, with errors that name the file and the line.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>

#include <fmt/format.h>

#include "kiln/error.h"
#include "track/report.h"

namespace kiln::track {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The file's text, or nothing when it does not exist; an error when it exists but cannot
// be read (a permission, a directory in its place).
std::optional<std::string> read_optional(const fs::path& path) {
  std::error_code error;
  if (!fs::exists(path, error)) return std::nullopt;
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  if (in) text << in.rdbuf();
  if (!in || fs::is_directory(path, error)) {
    fail(kUnknownSite, fmt::format("cannot read {}: {}", path.string(),
                                   errno ? std::strerror(errno) : "not a regular file"));
  }
  return text.str();
}

int64_t line_of(const std::string& text, size_t byte) {
  size_t end = std::min(byte, text.size());
  return 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(end), '\n');
}

json read_run_json(const fs::path& run_dir) {
  fs::path path = run_dir / "run.json";
  std::optional<std::string> text = read_optional(path);
  if (!text) {
    std::error_code error;
    fail(kUnknownSite,
         fs::is_directory(run_dir, error)
             ? fmt::format("{} is not a run directory: it has no run.json", run_dir.string())
             : fmt::format("no run directory at {}", run_dir.string()),
         "RUN is a run directory, <runs_dir>/<experiment>/<run-id> (`kiln runs list` shows "
         "them)");
  }
  json info;
  try {
    info = json::parse(*text);
  } catch (const json::parse_error& error) {
    // The byte nlohmann reports is one past the offending character.
    fail(kUnknownSite, fmt::format("{}:{}: not valid JSON ({})", path.string(),
                                   line_of(*text, error.byte ? error.byte - 1 : 0), error.what()));
  }
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
  std::optional<std::string> text = read_optional(path);
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
    json record = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (record.is_discarded()) {
      torn = number;
      continue;
    }
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
  run.config_toml = read_optional(run_dir / "config.toml").value_or("");
  read_metrics(run_dir, run);
  return run;
}

}  // namespace kiln::track
