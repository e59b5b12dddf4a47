// The run catalog (catalog.h): schema and migrations, writes, and the queries behind
// `kiln runs`.
#include "track/catalog.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "kiln/error.h"
#include "kiln/version.h"

namespace kiln::track {
namespace {

// kMigrations[v] takes a catalog from schema version v to v + 1. Append, never edit: a
// catalog written by an older kiln is brought forward by the steps it has not seen.
constexpr const char* kMigrations[] = {
    // 0 -> 1: the first schema.
    R"sql(
CREATE TABLE runs (
  run_key TEXT PRIMARY KEY,
  experiment TEXT NOT NULL,
  run_id TEXT NOT NULL,
  run_dir TEXT NOT NULL,
  status TEXT NOT NULL,
  started_at TEXT NOT NULL,
  finished_at TEXT,
  info TEXT NOT NULL
);
CREATE TABLE params (
  run_key TEXT NOT NULL REFERENCES runs(run_key) ON DELETE CASCADE,
  key TEXT NOT NULL,
  value TEXT NOT NULL,
  PRIMARY KEY (run_key, key)
);
CREATE TABLE tags (
  run_key TEXT NOT NULL REFERENCES runs(run_key) ON DELETE CASCADE,
  key TEXT NOT NULL,
  value TEXT NOT NULL,
  PRIMARY KEY (run_key, key)
);
CREATE TABLE metrics (
  run_key TEXT NOT NULL REFERENCES runs(run_key) ON DELETE CASCADE,
  key TEXT NOT NULL,
  step INTEGER NOT NULL,
  value REAL,
  wall_time REAL NOT NULL
);
CREATE INDEX metrics_by_run ON metrics (run_key, key, step);
CREATE TABLE artifacts (
  run_key TEXT NOT NULL REFERENCES runs(run_key) ON DELETE CASCADE,
  name TEXT NOT NULL,
  path TEXT NOT NULL,
  sha256 TEXT NOT NULL,
  bytes INTEGER NOT NULL,
  PRIMARY KEY (run_key, name)
);
CREATE TABLE lineage (
  run_key TEXT NOT NULL REFERENCES runs(run_key) ON DELETE CASCADE,
  relation TEXT NOT NULL,
  target TEXT NOT NULL
);
)sql",
};
static_assert(std::size(kMigrations) == Catalog::kSchemaVersion);

std::optional<double> as_number(const std::string& text) {
  double value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

// SQLite stores a NaN as NULL; metrics keep it so that a diverged run shows where.
void bind_value(SqliteStatement& statement, int index, double value) {
  if (std::isnan(value)) {
    statement.bind_null(index);
  } else {
    statement.bind(index, value);
  }
}

// The row, or nothing when its record (the info column) is not a JSON object: a damaged
// row is skipped with a warning naming the database and the run, so that one bad row
// does not make every `kiln runs` command fail.
std::optional<RunRow> read_row(SqliteStatement& rows, const std::filesystem::path& database) {
  RunRow row;
  row.key = rows.text(0);
  row.experiment = rows.text(1);
  row.run_id = rows.text(2);
  row.run_dir = rows.text(3);
  row.status = rows.text(4);
  row.started_at = rows.text(5);
  row.finished_at = rows.optional_text(6).value_or("");
  std::optional<RunInfo> info;
  try {
    info = parse_run_info(rows.text(7), database.string());
  } catch (const std::exception&) {
  }
  if (!info) {
    std::fprintf(stderr,
                 "warning: run catalog %s: the record of run %s is damaged (not a JSON object); "
                 "skipped (`kiln runs reindex` rebuilds the catalog from the run directories)\n",
                 database.string().c_str(), row.key.c_str());
    return std::nullopt;
  }
  row.info = std::move(*info);
  return row;
}

// Every row the statement yields, the damaged ones skipped (read_row).
std::vector<RunRow> read_rows(SqliteStatement& rows, const std::filesystem::path& database) {
  std::vector<RunRow> result;
  while (rows.step()) {
    if (std::optional<RunRow> row = read_row(rows, database)) result.push_back(std::move(*row));
  }
  return result;
}

constexpr const char* kRunColumns =
    "run_key, experiment, run_id, run_dir, status, started_at, finished_at, info";

}  // namespace

RunFilter RunFilter::parse(const std::string& text) {
  // Two-character operators first, so that "<=" is not read as "<".
  for (const char* op : {"!=", "<=", ">=", "=", "<", ">"}) {
    size_t at = text.find(op);
    if (at == std::string::npos || at == 0) continue;
    RunFilter filter{text.substr(0, at), op, text.substr(at + std::string_view(op).size())};
    bool known = filter.field == "experiment" || filter.field == "status" ||
                 filter.field == "run_id" || filter.field == "started_at" ||
                 filter.field.starts_with("param.") || filter.field.starts_with("tag.") ||
                 filter.field.starts_with("metric.");
    if (!known) {
      fail(kUnknownSite, fmt::format("--filter '{}': unknown field '{}'", text, filter.field),
           "fields: experiment, status, run_id, started_at, param.<config key> (param.optim.lr), "
           "tag.<name>, metric.<key> (metric.eval/test_accuracy)");
    }
    return filter;
  }
  fail(kUnknownSite, fmt::format("--filter '{}': expected FIELD OP VALUE", text),
       "OP is one of = != < <= > >=, e.g. --filter status=completed --filter "
       "'metric.eval/test_accuracy>0.85'");
}

Catalog::Catalog(const std::filesystem::path& path, SqliteDb::Mode mode, int busy_timeout_ms)
    : db_(path, mode, busy_timeout_ms) {
  if (mode == SqliteDb::Mode::kReadWrite) {
    // WAL lets readers (kiln runs list) run beside a writing trainer; NORMAL synchronisation
    // is safe in WAL mode (a power cut may lose the last commits, never corrupt the file),
    // and the run directories keep the record anyway.
    db_.execute("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL", "opening");
  }
  db_.execute("PRAGMA foreign_keys=ON", "opening");
  SqliteStatement version = db_.prepare("PRAGMA user_version");
  version.step();
  schema_version_ = static_cast<int>(version.integer(0));
  if (schema_version_ > kSchemaVersion) {
    fail(kUnknownSite,
         fmt::format("run catalog {}: schema version {} is newer than this kiln's ({}, kiln {})",
                     path.string(), schema_version_, kSchemaVersion, kVersion),
         "use the newer kiln that wrote it, or move the file aside and run `kiln runs reindex`");
  }
  if (schema_version_ < kSchemaVersion) {
    if (mode == SqliteDb::Mode::kReadOnly) {
      fail(kUnknownSite,
           fmt::format("run catalog {}: schema version {}, this kiln reads version {}",
                       path.string(), schema_version_, kSchemaVersion),
           "any kiln command that writes the catalog (kiln train, kiln runs reindex) migrates it");
    }
    migrate();
  }
}

void Catalog::migrate() {
  SqliteTransaction transaction(db_);
  // Another process may have migrated while this one waited for the lock.
  SqliteStatement version = db_.prepare("PRAGMA user_version");
  version.step();
  int from = static_cast<int>(version.integer(0));
  for (int step = from; step < kSchemaVersion; ++step) {
    db_.execute(kMigrations[step], fmt::format("migrating to schema version {}", step + 1));
  }
  db_.execute(fmt::format("PRAGMA user_version={}", kSchemaVersion));
  transaction.commit();
  schema_version_ = kSchemaVersion;
}

void Catalog::record_run(const RunRecord& run) {
  std::string key = run.key();
  SqliteTransaction transaction(db_);
  SqliteStatement upsert = db_.prepare(
      "INSERT INTO runs (run_key, experiment, run_id, run_dir, status, started_at, "
      "finished_at, info) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT(run_key) DO "
      "UPDATE SET run_dir=?4, status=?5, started_at=?6, finished_at=?7, info=?8");
  upsert.bind(1, key).bind(2, run.experiment).bind(3, run.run_id).bind(4, run.run_dir);
  upsert.bind(5, run.status).bind(6, run.started_at);
  if (run.finished_at.empty()) {
    upsert.bind_null(7);
  } else {
    upsert.bind(7, run.finished_at);
  }
  upsert.bind(8, run_info_text(run.info, -1));
  upsert.run();
  for (const char* table : {"params", "tags", "lineage", "artifacts"}) {
    db_.prepare(fmt::format("DELETE FROM {} WHERE run_key=?1", table)).bind(1, key).run();
  }
  SqliteStatement param = db_.prepare("INSERT INTO params VALUES (?1, ?2, ?3)");
  for (const auto& [name, value] : run.params)
    param.bind(1, key).bind(2, name).bind(3, value).run();
  SqliteStatement tag = db_.prepare("INSERT INTO tags VALUES (?1, ?2, ?3)");
  for (const auto& [name, value] : run.tags) tag.bind(1, key).bind(2, name).bind(3, value).run();
  SqliteStatement edge = db_.prepare("INSERT INTO lineage VALUES (?1, ?2, ?3)");
  for (const LineageEdge& e : run.lineage)
    edge.bind(1, key).bind(2, e.relation).bind(3, e.target).run();
  SqliteStatement artifact = db_.prepare("INSERT INTO artifacts VALUES (?1, ?2, ?3, ?4, ?5)");
  for (const ArtifactEntry& a : run.artifacts) {
    artifact.bind(1, key).bind(2, a.name).bind(3, a.path).bind(4, a.sha256).bind(5, a.bytes).run();
  }
  transaction.commit();
}

void Catalog::add_metrics(const std::string& run_key, std::span<const MetricPoint> points) {
  SqliteTransaction transaction(db_);
  SqliteStatement insert = db_.prepare("INSERT INTO metrics VALUES (?1, ?2, ?3, ?4, ?5)");
  for (const MetricPoint& point : points) {
    insert.bind(1, run_key).bind(2, point.key).bind(3, point.step);
    bind_value(insert, 4, point.value);
    insert.bind(5, point.wall_time).run();
  }
  transaction.commit();
}

void Catalog::replace_metrics(const std::string& run_key, std::span<const MetricPoint> points) {
  {
    SqliteTransaction transaction(db_);
    db_.prepare("DELETE FROM metrics WHERE run_key=?1").bind(1, run_key).run();
    transaction.commit();
  }
  add_metrics(run_key, points);
}

std::vector<RunRow> Catalog::list(std::span<const RunFilter> filters) {
  std::string sql = fmt::format("SELECT {} FROM runs WHERE 1", kRunColumns);
  // Each filter adds one condition with its own parameters, bound in order below.
  std::vector<std::string> texts;
  std::vector<std::optional<double>> numbers;
  for (const RunFilter& filter : filters) {
    std::optional<double> number = as_number(filter.value);
    std::string value = number ? fmt::format("CAST({{}} AS REAL) {} ?", filter.op)
                               : fmt::format("{{}} {} ?", filter.op);
    std::string condition;
    size_t dot = filter.field.find('.');
    std::string name = dot == std::string::npos ? "" : filter.field.substr(dot + 1);
    if (filter.field.starts_with("param.") || filter.field.starts_with("tag.")) {
      std::string table = filter.field.starts_with("param.") ? "params" : "tags";
      condition = fmt::format(
          "EXISTS (SELECT 1 FROM {} x WHERE x.run_key = runs.run_key AND "
          "x.key = ? AND {})",
          table, fmt::format(fmt::runtime(value), "x.value"));
      texts.push_back(name);
      numbers.push_back(std::nullopt);
    } else if (filter.field.starts_with("metric.")) {
      condition = fmt::format(fmt::runtime(value),
                              "(SELECT m.value FROM metrics m WHERE m.run_key = runs.run_key AND "
                              "m.key = ? ORDER BY m.step DESC, m.rowid DESC LIMIT 1)");
      texts.push_back(name);
      numbers.push_back(std::nullopt);
    } else {
      condition = fmt::format(fmt::runtime(value), filter.field);
    }
    sql += " AND " + condition;
    texts.push_back(filter.value);
    numbers.push_back(number);
  }
  sql += " ORDER BY started_at, run_key";
  SqliteStatement rows = db_.prepare(sql);
  for (size_t i = 0; i < texts.size(); ++i) {
    int index = static_cast<int>(i) + 1;
    if (numbers[i]) {
      rows.bind(index, *numbers[i]);
    } else {
      rows.bind(index, texts[i]);
    }
  }
  return read_rows(rows, db_.path());
}

RunRow Catalog::find(const std::string& spec) {
  std::string trimmed = spec;
  while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.pop_back();
  SqliteStatement rows = db_.prepare(fmt::format(
      "SELECT {} FROM runs WHERE run_key = ?1 OR run_id = ?1 OR run_dir = ?1 OR "
      "substr(run_key, 1, length(?1)) = ?1 OR substr(run_id, 1, length(?1)) = ?1 "
      "ORDER BY (run_key = ?1 OR run_id = ?1 OR run_dir = ?1) DESC, started_at, run_key",
      kRunColumns));
  rows.bind(1, trimmed);
  std::vector<RunRow> matches = read_rows(rows, db_.path());
  if (matches.empty()) {
    fail(kUnknownSite, fmt::format("no run '{}' in the run catalog {}", spec, db_.path().string()),
         "`kiln runs list` shows the runs; a run is named by <experiment>/<run id>, its run id, "
         "a unique prefix of either, or its directory");
  }
  bool exact =
      matches[0].key == trimmed || matches[0].run_id == trimmed || matches[0].run_dir == trimmed;
  if (!exact && matches.size() > 1) {
    std::string names;
    for (const RunRow& row : matches) names += "\n  " + row.key;
    fail(kUnknownSite, fmt::format("'{}' names {} runs:{}", spec, matches.size(), names),
         "give more of the run id, or <experiment>/<run id>");
  }
  return matches[0];
}

std::map<std::string, std::string> Catalog::params(const std::string& run_key) {
  return key_values("params", run_key);
}

std::map<std::string, std::string> Catalog::tags(const std::string& run_key) {
  return key_values("tags", run_key);
}

std::map<std::string, std::string> Catalog::key_values(std::string_view table,
                                                       const std::string& run_key) {
  std::map<std::string, std::string> result;
  SqliteStatement rows =
      db_.prepare(fmt::format("SELECT key, value FROM {} WHERE run_key=?1", table));
  rows.bind(1, run_key);
  while (rows.step()) result[rows.text(0)] = rows.text(1);
  return result;
}

std::vector<LineageEdge> Catalog::lineage(const std::string& run_key) {
  std::vector<LineageEdge> result;
  SqliteStatement rows =
      db_.prepare("SELECT relation, target FROM lineage WHERE run_key=?1 ORDER BY rowid");
  rows.bind(1, run_key);
  while (rows.step()) result.push_back({rows.text(0), rows.text(1)});
  return result;
}

std::vector<ArtifactEntry> Catalog::artifacts(const std::string& run_key) {
  std::vector<ArtifactEntry> result;
  SqliteStatement rows =
      db_.prepare("SELECT name, path, sha256, bytes FROM artifacts WHERE run_key=?1 ORDER BY name");
  rows.bind(1, run_key);
  while (rows.step()) result.push_back({rows.text(0), rows.text(1), rows.text(2), rows.integer(3)});
  return result;
}

std::vector<MetricPoint> Catalog::metrics(const std::string& run_key, const std::string& key) {
  std::vector<MetricPoint> result;
  SqliteStatement rows = db_.prepare(
      "SELECT key, step, value, wall_time FROM metrics WHERE run_key=?1 AND (?2 = '' OR key=?2) "
      "ORDER BY key, step, rowid");
  rows.bind(1, run_key).bind(2, key);
  while (rows.step()) {
    double value = rows.is_null(2) ? std::nan("") : rows.real(2);
    result.push_back({rows.text(0), rows.integer(1), value, rows.real(3)});
  }
  return result;
}

}  // namespace kiln::track
