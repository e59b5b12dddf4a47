// Where `kiln resume` continues a run from: the newest savepoint of this run that loads and
// fits the run's model, and what differs between the run's saved identity and the config,
// data and kiln of now (docs/savepoints.md, "Resuming").
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "io/savepoint.h"
#include "track/run_info.h"
#include "train/run_identity.h"
#include "train/train_savepoint.h"

namespace kiln::train {

struct ResumePoint {
  std::optional<savepoint::Loaded> loaded;  // none: start again from step 0
  std::optional<Restored> restored;         // the state, keys and counters of `loaded`
  std::vector<std::string> skipped;         // damaged savepoints, each with why
  std::vector<std::string> changes;         // identity differences, "what: saved -> now"
};

// Scans `run_dir`/savepoints from the newest: one that does not load, belongs to another
// run or (under the same identity) does not fit `like`/`keys_like` is skipped. The identity
// compared is the chosen savepoint's, else run.json's (`info`). A difference is an error
// naming each, unless `allow_changed`; a savepoint saved with another batch size is one.
ResumePoint find_resume_point(const std::filesystem::path& run_dir, const track::RunInfo& info,
                              const RunIdentity& identity, const TrainState& like,
                              const RunKeys& keys_like, int64_t batch_size, bool allow_changed);

// The record of this resume in run.json (its environment, what it continues from).
track::ResumeRecord resume_record(const std::filesystem::path& run_dir, const track::RunInfo& info,
                                  const ResumePoint& point);

}  // namespace kiln::train
