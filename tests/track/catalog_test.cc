// The run catalog: schema and migration, records and queries, filters, naming runs, bad
// catalogs (corrupt, newer, locked), several writing processes at once, and the background
// recorder.
#include "track/catalog.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <fstream>

#include "support/errors.h"
#include "support/scratch_dir.h"
#include "track/catalog_recorder.h"

namespace kiln::track {
namespace {

using kiln::testing::error_of;
using kiln::testing::ScratchDir;
using ::testing::HasSubstr;

RunRecord run(const std::string& id, const std::string& status, const std::string& lr) {
  RunRecord record;
  record.experiment = "mlp";
  record.run_id = id;
  record.run_dir = "runs/mlp/" + id;
  record.status = status;
  record.started_at = "2026-12-02T10:00:" + id.substr(id.size() - 2) + "Z";
  record.info.steps = 10;
  record.params = {{"optim.lr", lr}, {"optim.name", "\"adamw\""}};
  record.tags = {{"config_sha256", "abc" + id}};
  record.lineage = {{"resumed_from", "savepoints/step-00000005"}};
  record.artifacts = {{"params", "params.safetensors", "feed", 123}};
  return record;
}

std::vector<MetricPoint> points(const std::string& key, int count, double start) {
  std::vector<MetricPoint> out;
  for (int i = 1; i <= count; ++i) out.push_back({key, i, start + i, 1000.0 + i});
  return out;
}

TEST(Catalog, ANewCatalogHasTheCurrentSchemaAndRoundTripsARun) {
  ScratchDir dir;
  Catalog catalog(dir / "kiln.db");
  EXPECT_EQ(catalog.schema_version(), Catalog::kSchemaVersion);
  catalog.record_run(run("20261202-100001-aaaa", "running", "0.001"));
  catalog.add_metrics("mlp/20261202-100001-aaaa", points("train/loss", 3, 0.5));
  std::vector<MetricPoint> nan_point = {{"eval/test_loss", 3, std::nan(""), 2000}};
  catalog.add_metrics("mlp/20261202-100001-aaaa", nan_point);

  // A second connection (another process would do the same) sees it all.
  Catalog reader(dir / "kiln.db");
  std::vector<RunRow> rows = reader.list();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].key, "mlp/20261202-100001-aaaa");
  EXPECT_EQ(rows[0].status, "running");
  EXPECT_EQ(rows[0].info.steps, 10);
  EXPECT_EQ(reader.params(rows[0].key).at("optim.lr"), "0.001");
  EXPECT_EQ(reader.tags(rows[0].key).at("config_sha256"), "abc20261202-100001-aaaa");
  ASSERT_EQ(reader.lineage(rows[0].key).size(), 1u);
  EXPECT_EQ(reader.lineage(rows[0].key)[0].target, "savepoints/step-00000005");
  ASSERT_EQ(reader.artifacts(rows[0].key).size(), 1u);
  EXPECT_EQ(reader.artifacts(rows[0].key)[0].bytes, 123);
  std::vector<MetricPoint> loss = reader.metrics(rows[0].key, "train/loss");
  ASSERT_EQ(loss.size(), 3u);
  EXPECT_EQ(loss[2].step, 3);
  EXPECT_EQ(loss[2].value, 3.5);
  EXPECT_EQ(loss[2].wall_time, 1003.0);
  std::vector<MetricPoint> test_loss = reader.metrics(rows[0].key, "eval/test_loss");
  ASSERT_EQ(test_loss.size(), 1u);
  EXPECT_TRUE(std::isnan(test_loss[0].value));  // a diverged run keeps its NaN

  // Recording the run again (its status changed) updates it in place.
  RunRecord finished = run("20261202-100001-aaaa", "completed", "0.001");
  finished.finished_at = "2026-12-02T10:05:00Z";
  finished.lineage.clear();
  catalog.record_run(finished);
  rows = reader.list();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].status, "completed");
  EXPECT_EQ(rows[0].finished_at, "2026-12-02T10:05:00Z");
  EXPECT_TRUE(reader.lineage(rows[0].key).empty());
  EXPECT_EQ(reader.metrics(rows[0].key).size(), 4u);  // metrics are not touched

  catalog.replace_metrics(rows[0].key, points("train/loss", 2, 0));
  EXPECT_EQ(reader.metrics(rows[0].key).size(), 2u);
}

TEST(Catalog, FiltersCompareNumbersAsNumbersAndTextAsText) {
  ScratchDir dir;
  Catalog catalog(dir / "kiln.db");
  catalog.record_run(run("20261202-100001-aaaa", "completed", "0.001"));
  catalog.record_run(run("20261202-100002-bbbb", "failed", "0.0003"));
  catalog.record_run(run("20261202-100003-cccc", "completed", "0.01"));
  catalog.add_metrics("mlp/20261202-100001-aaaa", points("eval/test_accuracy", 2, 0.1));
  catalog.add_metrics("mlp/20261202-100003-cccc", points("eval/test_accuracy", 2, -1.5));
  auto keys = [&](std::vector<std::string> texts) {
    std::vector<RunFilter> filters;
    for (const std::string& text : texts) filters.push_back(RunFilter::parse(text));
    std::vector<std::string> out;
    for (const RunRow& row : catalog.list(filters)) out.push_back(row.run_id.substr(16));
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(keys({}), (V{"aaaa", "bbbb", "cccc"}));
  EXPECT_EQ(keys({"status=completed"}), (V{"aaaa", "cccc"}));
  EXPECT_EQ(keys({"status!=completed"}), (V{"bbbb"}));
  // 0.0003 < 0.001 < 0.01 as numbers ("0.0003" > "0.001" as text).
  EXPECT_EQ(keys({"param.optim.lr<=0.001"}), (V{"aaaa", "bbbb"}));
  EXPECT_EQ(keys({"param.optim.lr>0.001", "status=completed"}), (V{"cccc"}));
  // The last value: aaaa ends at 2.1, cccc at 0.5; bbbb has none.
  EXPECT_EQ(keys({"metric.eval/test_accuracy>1"}), (V{"aaaa"}));
  EXPECT_EQ(keys({"tag.config_sha256=abc20261202-100002-bbbb"}), (V{"bbbb"}));
  EXPECT_EQ(keys({"experiment=other"}), V{});
}

TEST(Catalog, FilterTextThatIsNotAFilterIsAnError) {
  EXPECT_THAT(error_of([] { RunFilter::parse("status"); }), HasSubstr("expected FIELD OP VALUE"));
  EXPECT_THAT(error_of([] { RunFilter::parse("=completed"); }),
              HasSubstr("expected FIELD OP VALUE"));
  EXPECT_THAT(error_of([] { RunFilter::parse("colour=red"); }),
              HasSubstr("unknown field 'colour'"));
  RunFilter filter = RunFilter::parse("param.optim.lr<=3e-4");
  EXPECT_EQ(filter.field, "param.optim.lr");
  EXPECT_EQ(filter.op, "<=");
  EXPECT_EQ(filter.value, "3e-4");
}

TEST(Catalog, ARunIsNamedByKeyIdUniquePrefixOrDirectory) {
  ScratchDir dir;
  Catalog catalog(dir / "kiln.db");
  catalog.record_run(run("20261202-100001-aaaa", "completed", "0.001"));
  catalog.record_run(run("20261202-100002-bbbb", "completed", "0.001"));
  EXPECT_EQ(catalog.find("mlp/20261202-100001-aaaa").run_id, "20261202-100001-aaaa");
  EXPECT_EQ(catalog.find("20261202-100002-bbbb").run_id, "20261202-100002-bbbb");
  EXPECT_EQ(catalog.find("20261202-100002").run_id, "20261202-100002-bbbb");
  EXPECT_EQ(catalog.find("runs/mlp/20261202-100001-aaaa/").run_id, "20261202-100001-aaaa");
  std::string ambiguous = error_of([&] { catalog.find("20261202-10000"); });
  EXPECT_THAT(ambiguous, HasSubstr("names 2 runs"));
  EXPECT_THAT(ambiguous, HasSubstr("mlp/20261202-100002-bbbb"));
  EXPECT_THAT(error_of([&] { catalog.find("nope"); }), HasSubstr("no run 'nope'"));
}

TEST(Catalog, AnOlderCatalogIsMigratedForward) {
  ScratchDir dir;
  {
    // A database of schema version 0: SQLite's own empty file.
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open((dir / "kiln.db").c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE unrelated (x)", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  Catalog catalog(dir / "kiln.db");
  EXPECT_EQ(catalog.schema_version(), Catalog::kSchemaVersion);
  catalog.record_run(run("20261202-100001-aaaa", "completed", "0.001"));
  EXPECT_EQ(catalog.list().size(), 1u);
  // Read-only access does not migrate: it says what would.
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open((dir / "old.db").c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE unrelated (x)", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  EXPECT_THAT(error_of([&] { Catalog(dir / "old.db", SqliteDb::Mode::kReadOnly); }),
              HasSubstr("schema version 0, this kiln reads version 1"));
}

TEST(Catalog, ACatalogOfANewerSchemaIsRefused) {
  ScratchDir dir;
  { Catalog catalog(dir / "kiln.db"); }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir / "kiln.db").c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "PRAGMA user_version=99", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  std::string message = error_of([&] { Catalog catalog(dir / "kiln.db"); });
  EXPECT_THAT(message, HasSubstr("kiln.db"));
  EXPECT_THAT(message, HasSubstr("schema version 99 is newer than this kiln's (1"));
}

TEST(Catalog, ACorruptCatalogIsAnErrorThatSaysHowToRebuildIt) {
  ScratchDir dir;
  std::ofstream(dir / "kiln.db") << std::string(8192, 'x');
  std::string message = error_of([&] { Catalog catalog(dir / "kiln.db"); });
  EXPECT_THAT(message, HasSubstr("kiln.db"));
  EXPECT_THAT(message, HasSubstr("file is not a database"));
  EXPECT_THAT(message, HasSubstr("kiln runs reindex"));
}

TEST(Catalog, SeveralProcessesWriteAtOnceWithoutLosingARecord) {
  ScratchDir dir;
  { Catalog create(dir / "kiln.db"); }  // the children find it migrated, or migrate it
  constexpr int kProcesses = 4;
  constexpr int kRuns = 25;
  constexpr int kPoints = 40;
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      // The child touches nothing but SQLite, and leaves with _exit (no gtest teardown).
      int status = 0;
      try {
        Catalog catalog(dir / "kiln.db", SqliteDb::Mode::kReadWrite, 30000);
        for (int r = 0; r < kRuns; ++r) {
          std::string id = fmt::format("p{}-r{:02d}", p, r);
          catalog.record_run(run(id, "running", "0.001"));
          // One transaction per metric batch, interleaved with the other processes'.
          for (int batch = 0; batch < 4; ++batch) {
            catalog.add_metrics("mlp/" + id, points("train/loss", kPoints / 4, batch * 10.0));
          }
          catalog.record_run(run(id, "completed", "0.001"));
        }
      } catch (const std::exception& error) {
        std::fprintf(stderr, "child %d: %s\n", p, error.what());
        status = 1;
      }
      _exit(status);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a writer failed";
  }
  Catalog catalog(dir / "kiln.db");
  std::vector<RunRow> rows = catalog.list({});
  ASSERT_EQ(rows.size(), static_cast<size_t>(kProcesses * kRuns));
  for (const RunRow& row : rows) {
    EXPECT_EQ(row.status, "completed") << row.key;
    EXPECT_EQ(catalog.metrics(row.key).size(), static_cast<size_t>(kPoints)) << row.key;
  }
}

TEST(CatalogRecorder, RecordsEverythingQueuedInOrder) {
  ScratchDir dir;
  CatalogRecorder recorder(dir / "kiln.db");
  recorder.record_run(run("20261202-100001-aaaa", "running", "0.001"));
  for (int step = 1; step <= 300; ++step) {
    recorder.add_metrics("mlp/20261202-100001-aaaa",
                         {{"train/loss", step, 1.0 / step, 1000.0 + step}});
  }
  recorder.record_run(run("20261202-100001-aaaa", "completed", "0.001"));
  EXPECT_EQ(recorder.finish(std::chrono::seconds(20)), "");
  Catalog catalog(dir / "kiln.db");
  ASSERT_EQ(catalog.list().size(), 1u);
  EXPECT_EQ(catalog.list()[0].status, "completed");
  std::vector<MetricPoint> loss = catalog.metrics("mlp/20261202-100001-aaaa", "train/loss");
  ASSERT_EQ(loss.size(), 300u);
  for (int i = 0; i < 300; ++i) EXPECT_EQ(loss[i].step, i + 1);
}

TEST(CatalogRecorder, ALockedCatalogIsReportedNotWaitedFor) {
  ScratchDir dir;
  { Catalog create(dir / "kiln.db"); }
  // Another process holds the write lock for the whole test.
  sqlite3* holder = nullptr;
  ASSERT_EQ(sqlite3_open((dir / "kiln.db").c_str(), &holder), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(holder, "BEGIN EXCLUSIVE", nullptr, nullptr, nullptr), SQLITE_OK);
  auto start = std::chrono::steady_clock::now();
  std::string problem;
  {
    CatalogRecorder recorder(dir / "kiln.db", /*busy_timeout_ms=*/100);
    recorder.record_run(run("20261202-100001-aaaa", "running", "0.001"));
    recorder.add_metrics("mlp/20261202-100001-aaaa", points("train/loss", 50, 0));
    problem = recorder.finish(std::chrono::milliseconds(300));
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_THAT(problem, HasSubstr("kiln.db"));
  EXPECT_THAT(problem, HasSubstr("database is locked"));
  EXPECT_THAT(problem, HasSubstr("1 run record(s) and 50 metric point(s) not recorded"));
  // Bounded by the wait and one busy timeout, far from a hang (a generous bound: this
  // checks that finish() gives up, not how fast it is).
  EXPECT_LT(seconds, 10.0);
  sqlite3_exec(holder, "ROLLBACK", nullptr, nullptr, nullptr);
  sqlite3_close(holder);
}

TEST(CatalogRecorder, ACorruptCatalogIsReportedAndNothingThrows) {
  ScratchDir dir;
  std::ofstream(dir / "kiln.db") << std::string(8192, 'x');
  CatalogRecorder recorder(dir / "kiln.db", 100);
  recorder.record_run(run("20261202-100001-aaaa", "running", "0.001"));
  std::string problem = recorder.finish(std::chrono::milliseconds(200));
  EXPECT_THAT(problem, HasSubstr("file is not a database"));
  EXPECT_THAT(problem, HasSubstr("1 run record(s) and 0 metric point(s) not recorded"));
}

}  // namespace
}  // namespace kiln::track
