// `kiln report`: one self-contained HTML file describing training runs (docs/profiling.md,
// "The HTML report"). Inline CSS and SVG only: it needs no script and fetches nothing, so it
// can be mailed, attached to a ticket or opened from an archive years later. Several runs
// are overlaid (one color per run) in the same charts.
//
// The report is made from what a run directory holds (run.json, config.toml,
// metrics.jsonl), so it can be made for any run, finished, failed or still going. Every
// text from those files is escaped. The HTML depends only on the runs' data: the same run
// directory gives the same bytes.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "track/metrics_line.h"
#include "track/run_info.h"

namespace kiln::track {

struct RunData {
  RunInfo info;                      // run.json
  std::string config_toml;           // empty when the run has no config.toml
  std::vector<MetricsLine> metrics;  // in the file's order
  bool torn_last_line = false;       // metrics.jsonl ended in a partial line (left out)

  // "<experiment>/<run id>" from run.json ("?" for either when it is missing).
  std::string key() const;
};

// Reads `run_dir`/run.json (required), config.toml and metrics.jsonl (either may be missing:
// a run that stopped early). An unreadable file, one that is not a regular file or is over
// its size limit (io/bounded_read.h), a run.json that is not a JSON object or is nested too
// deep, or a metrics line that is not a JSON object (except a torn last line) is a
// kiln::Error naming the file and line.
RunData load_run_data(const std::filesystem::path& run_dir);

// The whole HTML document. With several runs their curves share the charts.
std::string render_report(const std::vector<RunData>& runs);

// Refuses, naming `out`, a destination the report would replace that is not an HTML file:
// a directory, a link, a FIFO, a device (the atomic rename would swap the device node
// itself for the report), or any other existing file (run.json, metrics.jsonl...).
void check_report_destination(const std::filesystem::path& out);

// render_report written to `out` atomically (a reader never sees a partial report), after
// check_report_destination.
void write_report(const std::filesystem::path& out, const std::vector<RunData>& runs);

// The report of one run directory, written to `run_dir`/report.html; returns that path.
std::filesystem::path write_run_report(const std::filesystem::path& run_dir);

}  // namespace kiln::track
