// The run catalog, runs/kiln.db: one SQLite database indexing every run under a runs
// directory (its identity and status, config keys as params, tags, metrics with step and
// wall time, artifacts, and lineage: which savepoint a run resumed from, which artifact a
// savepoint became). It is an index, not the record: each run directory holds everything
// the catalog does, so a locked, corrupt or missing catalog never stops a run, and
// `kiln runs reindex` rebuilds it from the directories.
//
// Several processes may write at once: the database is in WAL mode (readers never block the
// writer) and each connection waits up to a busy timeout for another writer's lock. The
// schema is versioned (SQLite's user_version) and migrated forward on open; a catalog
// written by a newer kiln is refused, not guessed at.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "track/run_info.h"
#include "track/sqlite_db.h"

namespace kiln::track {

struct MetricPoint {
  std::string key;  // "train/loss", "eval/test_accuracy"
  int64_t step = 0;
  double value = 0;
  double wall_time = 0;  // Unix seconds
};

// An edge to another run, savepoint or artifact: ("resumed_from", "<savepoint dir>"),
// ("exported_to", "<artifact path>").
struct LineageEdge {
  std::string relation;
  std::string target;
};

struct ArtifactEntry {
  std::string name;  // "params"
  std::string path;  // relative to the run directory
  std::string sha256;
  int64_t bytes = 0;
};

// What the catalog keeps of one run (built by the trainer, or from a run directory).
struct RunRecord {
  std::string experiment;
  std::string run_id;
  std::string run_dir;
  std::string status;  // run.json's: running, completed, failed, interrupted, crashed
  std::string started_at;
  std::string finished_at;                    // empty while running
  RunInfo info;                               // run.json as of this record
  std::map<std::string, std::string> params;  // resolved config, "section.key" -> value
  std::map<std::string, std::string> tags;
  std::vector<LineageEdge> lineage;
  std::vector<ArtifactEntry> artifacts;
  // The run's name in the catalog: "<experiment>/<run id>" (run ids are unique only within
  // an experiment).
  std::string key() const { return experiment + "/" + run_id; }
};

// One row of `kiln runs list`.
struct RunRow {
  std::string key;
  std::string experiment;
  std::string run_id;
  std::string run_dir;
  std::string status;
  std::string started_at;
  std::string finished_at;
  RunInfo info;
};

// A condition of `kiln runs list --filter`: FIELD OP VALUE with OP one of = != < <= > >=.
// FIELD is experiment, status, run_id, started_at, param.<config key>, tag.<name> or
// metric.<key> (the metric's value at its last step). A VALUE that reads as a number
// compares as one.
struct RunFilter {
  std::string field;
  std::string op;
  std::string value;
  // Parses "param.optim.lr<=0.001"; an error names the text and what was expected.
  static RunFilter parse(const std::string& text);
};

class Catalog {
 public:
  // The schema this kiln writes; migrations bring older catalogs up to it.
  static constexpr int kSchemaVersion = 1;
  static std::filesystem::path path_in(const std::filesystem::path& runs_dir) {
    return runs_dir / "kiln.db";
  }

  // Opens the catalog at `path`: kReadWrite creates it and migrates it forward; kReadOnly
  // requires it to exist at the current schema. An error (a kiln::Error) names the file.
  explicit Catalog(const std::filesystem::path& path,
                   SqliteDb::Mode mode = SqliteDb::Mode::kReadWrite, int busy_timeout_ms = 5000);

  int schema_version() const { return schema_version_; }
  const std::filesystem::path& path() const { return db_.path(); }

  // Inserts or updates the run and replaces its params, tags, lineage and artifacts.
  void record_run(const RunRecord& run);
  void add_metrics(const std::string& run_key, std::span<const MetricPoint> points);
  // Replaces all of a run's metrics (a resumed run redoes the steps after its savepoint).
  void replace_metrics(const std::string& run_key, std::span<const MetricPoint> points);

  // Runs matching every filter, oldest first.
  std::vector<RunRow> list(std::span<const RunFilter> filters = {});
  // The run named by `spec`: its key, its run id, a unique prefix of either, or its run
  // directory. An error says when none or several match.
  RunRow find(const std::string& spec);
  std::map<std::string, std::string> params(const std::string& run_key);
  std::map<std::string, std::string> tags(const std::string& run_key);
  std::vector<LineageEdge> lineage(const std::string& run_key);
  std::vector<ArtifactEntry> artifacts(const std::string& run_key);
  // In (key, step) order; all keys when `key` is empty.
  std::vector<MetricPoint> metrics(const std::string& run_key, const std::string& key = "");

 private:
  // The key/value rows of table `table` ("params" or "tags": never user text) for a run.
  std::map<std::string, std::string> key_values(std::string_view table, const std::string& run_key);
  void migrate();
  SqliteDb db_;
  int schema_version_ = 0;
};

}  // namespace kiln::track
