// A run's own records read back as kiln reads them after a crash or an edit (issue 43,
// defects 3, 9, 10 and 11: deep JSON, names that are not UTF-8, damaged catalog rows).
// The first input byte picks the reader (modulo 3), the rest is the record:
//   0  run.json through what `kiln resume` and `kiln runs reindex` do with it: read_run_info,
//      run_may_be_running, run_record, the catalog's record_run, then list and find;
//   1  run.json through `kiln report`: load_run_data, render_report;
//   2  a catalog row whose record is the input (as a damaged database holds it): list and
//      find.
// Properties: what reads as a record writes back as one, and a second rewrite changes
// nothing (track/run_info.h keeps what it does not understand verbatim); a row
// that list gives holds an object; a damaged row is left out of list and find alike.
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include "fuzz_support.h"
#include "track/catalog.h"
#include "track/report.h"
#include "track/run_info.h"
#include "track/sqlite_db.h"
#include "train/run_directory.h"
#include "train/run_record.h"

namespace {

namespace fs = std::filesystem;
using kiln::fuzz::finding;
using kiln::fuzz::parses;

struct Scratch {
  fs::path root = fs::path("/dev/shm") / ("kiln-fuzz-run-json-" + std::to_string(::getpid()));
  fs::path run_dir = root / "experiment" / "20261206-000000-00000000";
  fs::path database = root / "kiln.db";
  Scratch() {
    fs::remove_all(root);
    fs::create_directories(run_dir);
  }
};

const Scratch& scratch() {
  static const Scratch made;
  return made;
}

// A record that read back writes back as a record that reads back as itself: rewriting a
// run.json changes nothing the first rewrite did not.
void check_written_back(const kiln::track::RunInfo& record) {
  std::string text = kiln::track::run_info_text(record);
  kiln::track::RunInfo again;
  if (!parses([&] { again = kiln::track::parse_run_info(text, "run.json"); })) {
    finding("a record did not write back as a run record");
  }
  if (kiln::track::run_info_text(again) != text) finding("a record changed on its second rewrite");
}

void check_listed(kiln::track::Catalog& catalog, const std::string& key) {
  std::vector<kiln::track::RunRow> rows;
  if (!parses([&] { rows = catalog.list(); })) return;
  for (const kiln::track::RunRow& row : rows) check_written_back(row.info);
  kiln::track::RunRow found;
  bool listed = rows.size() == 1;
  if (parses([&] { found = catalog.find(key); }) != listed) {
    finding("list and find disagree on whether the run's row is usable");
  }
}

void through_resume_and_reindex(const uint8_t* data, size_t size) {
  const Scratch& where = scratch();
  kiln::fuzz::InputFile::write_to(where.run_dir / "run.json", data, size);
  kiln::track::RunInfo info;
  if (!parses([&] { info = kiln::track::read_run_info(where.run_dir); })) return;
  check_written_back(info);
  (void)parses([&] { (void)kiln::train::run_may_be_running(info); });
  kiln::track::RunRecord record;
  if (!parses([&] { record = kiln::train::run_record(where.run_dir, info); })) return;
  fs::remove(where.database);
  kiln::track::Catalog catalog(where.database);
  if (!parses([&] { catalog.record_run(record); })) return;
  check_listed(catalog, record.key());
}

void through_report(const uint8_t* data, size_t size) {
  const Scratch& where = scratch();
  kiln::fuzz::InputFile::write_to(where.run_dir / "run.json", data, size);
  kiln::track::RunData run;
  if (!parses([&] { run = kiln::track::load_run_data(where.run_dir); })) return;
  check_written_back(run.info);
  std::string html;
  (void)parses([&] { html = kiln::track::render_report({run}); });
}

void as_a_catalog_row(const uint8_t* data, size_t size) {
  const Scratch& where = scratch();
  fs::remove(where.database);
  kiln::track::Catalog catalog(where.database);
  kiln::track::RunRecord record;
  record.experiment = "experiment";
  record.run_id = where.run_dir.filename().string();
  record.run_dir = where.run_dir.string();
  record.status = "completed";
  record.started_at = "2026-12-06T00:00:00Z";
  catalog.record_run(record);
  {
    kiln::track::SqliteDb raw(where.database, kiln::track::SqliteDb::Mode::kReadWrite, 1000);
    raw.prepare("UPDATE runs SET info = ?1")
        .bind(1, std::string_view(reinterpret_cast<const char*>(data), size))
        .run();
  }
  check_listed(catalog, record.key());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  switch (data[0] % 3) {
    case 0:
      through_resume_and_reindex(data + 1, size - 1);
      break;
    case 1:
      through_report(data + 1, size - 1);
      break;
    default:
      as_a_catalog_row(data + 1, size - 1);
  }
  return 0;
}
