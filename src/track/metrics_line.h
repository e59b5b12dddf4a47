// metrics.jsonl, a run's metrics one JSON object per line, as a type: the trainer writes
// lines through this, and the report, the catalog, TensorBoard and MLflow read them
// through this (docs/tracking.md, "The run directory").
//
//   {"accuracy":0.82,"data_wait_ms":0.01,"epoch":1,"kind":"train","loss":0.49,"lr":0.001,
//    "step":400,"step_ms":2.1,"time":1796608113.3}
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "track/catalog.h"

namespace kiln::track {

struct MetricsLine {
  std::string kind;  // "train" (one per step), "eval" (one per epoch), "nonfinite"
  int64_t step = 0;
  int64_t epoch = 0;
  std::optional<double> time;  // Unix seconds, added as the line is queued
  // The numbers, by name. A NaN or an infinity is written as the text "nan", "inf" or
  // "-inf" (JSON has no such numbers) and read back as the number.
  std::map<std::string, double> values;
  std::map<std::string, std::string> texts;               // e.g. a skipped step's "action"
  std::map<std::string, std::vector<std::string>> lists;  // e.g. "nonfinite_gradients"
};

// One line of metrics.jsonl, without its newline; keys in sorted order.
std::string metrics_line_text(const MetricsLine& line);

struct MetricsFile {
  std::vector<MetricsLine> lines;  // in the file's order
  bool torn_last_line = false;     // the file ended in a partial line (left out)
};

// Reads metrics.jsonl's text; `where` names it in errors. A last line that is not JSON
// (torn by a crash) is left out; any other line that is not a JSON object, or a "train" or
// "eval" line without an integer "step", is a kiln::Error naming `where` and the line.
MetricsFile parse_metrics_lines(std::string_view text, const std::string& where);

// `run_dir`/metrics.jsonl, as parse_metrics_lines; none when the file is missing (a run
// that stopped before its first step).
MetricsFile read_metrics_file(const std::filesystem::path& run_dir);

// The points of one line for the catalog, TensorBoard and MLflow: a train line's numbers
// as train/<name>, an evaluation's as eval/<name> (not "time", which is the points' wall
// time); other kinds give none.
std::vector<MetricPoint> metric_points(const MetricsLine& line);

}  // namespace kiln::track
