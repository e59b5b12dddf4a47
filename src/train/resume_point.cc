// Choosing the savepoint a resume continues from (resume_point.h).
#include "train/resume_point.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "io/json_text.h"
#include "kiln/error.h"
#include "kiln/version.h"
#include "track/run_environment.h"
#include "train/run_directory.h"
#include "train/run_identity.h"

namespace kiln::train {
namespace fs = std::filesystem;

namespace {

void refuse_changes(const fs::path& run_dir, const ResumePoint& point) {
  std::string list;
  for (const std::string& change : point.changes) list += "\n  " + change;
  fail(
      kUnknownSite,
      fmt::format("cannot resume {}: the run identity differs from its {} (saved -> now):{}",
                  run_dir.string(),
                  point.loaded ? fmt::format("savepoint {}", point.loaded->path.filename().string())
                               : std::string("run.json"),
                  list),
      "resume with the same config, data and kiln, or pass --allow-changed to continue "
      "anyway (recorded in run.json)");
}

// The identity a savepoint was written under (its manifest's "identity").
RunIdentity saved_identity(const savepoint::Loaded& loaded) {
  return parse_identity(loaded.identity_json);
}

}  // namespace

ResumePoint find_resume_point(const fs::path& run_dir, const track::RunInfo& info,
                              const RunIdentity& identity, const TrainState& like,
                              const RunKeys& keys_like, int64_t batch_size, bool allow_changed) {
  fs::path dir = run_dir / "savepoints";
  ResumePoint point;
  // Skipped like a savepoint whose files do not load: one copied from another run's
  // directory, and one of this run (the same identity) whose trees do not fit the run's
  // model (a tensor renamed or reshaped by an edit). Under a changed identity the
  // difference is reported below instead.
  auto fits_this_run = [&](const savepoint::Loaded& candidate) {
    point.restored.reset();
    if (!candidate.run_id.empty() && candidate.run_id != info.run_id) {
      fail(kUnknownSite, fmt::format("it is a savepoint of run {}, not of this run ({})",
                                     candidate.run_id, info.run_id));
    }
    if (!identity_differences(saved_identity(candidate), identity).empty()) {
      return;
    }
    point.restored = restore(candidate, like, keys_like);
  };
  if (!savepoint::list_committed(dir).empty()) {
    try {
      point.loaded = savepoint::load_latest(dir, &point.skipped, fits_this_run);
    } catch (const Error&) {
      // Every one damaged (listed in `skipped`): start again from the config.
    }
  }
  RunIdentity saved = point.loaded    ? saved_identity(*point.loaded)
                      : info.identity ? RunIdentity::from_record(*info.identity)
                                      : RunIdentity();
  point.changes = identity_differences(saved, identity);
  if (!point.loaded && !info.identity) point.changes.clear();  // older run.json
  if (!point.changes.empty() && !allow_changed) refuse_changes(run_dir, point);
  if (point.loaded) {
    if (!point.restored) point.restored = restore(*point.loaded, like, keys_like);  // changed
    if (point.restored->counters.batch_size != batch_size) {
      fail(kUnknownSite, fmt::format("cannot resume from {}: it was saved with batch size {}, the "
                                     "config says {}",
                                     point.loaded->path.string(),
                                     point.restored->counters.batch_size, batch_size));
    }
  }
  return point;
}

track::ResumeRecord resume_record(const fs::path& run_dir, const track::RunInfo& info,
                                  const ResumePoint& point) {
  track::ResumeRecord record;
  record.at = utc_timestamp();
  record.from_step = point.restored ? point.restored->counters.step : 0;
  record.previous_status = info.status;
  record.environment = io::json_text(track::run_environment());
  if (point.loaded) record.savepoint = fs::relative(point.loaded->path, run_dir).string();
  record.skipped_savepoints = point.skipped;
  record.changed = point.changes;
  return record;
}

}  // namespace kiln::train
