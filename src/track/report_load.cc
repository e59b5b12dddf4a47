// Reading a run directory for `kiln report` (report.h): run.json, config.toml and
// metrics.jsonl, with errors that name the file and the line.
#include <utility>

#include "io/bounded_read.h"
#include "track/report.h"

namespace kiln::track {

std::string RunData::key() const {
  return (info.experiment.empty() ? "?" : info.experiment) + "/" +
         (info.run_id.empty() ? "?" : info.run_id);
}

RunData load_run_data(const std::filesystem::path& run_dir) {
  RunData run;
  run.info = read_run_info(run_dir);
  run.config_toml =
      io::read_regular_file_if_present(run_dir / "config.toml", io::kMaxRecordBytes).value_or("");
  MetricsFile metrics = read_metrics_file(run_dir);
  run.metrics = std::move(metrics.lines);
  run.torn_last_line = metrics.torn_last_line;
  return run;
}

}  // namespace kiln::track
