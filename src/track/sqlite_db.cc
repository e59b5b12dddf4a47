// SQLite connection, statements and transactions (sqlite_db.h).
#include "track/sqlite_db.h"

#include <sqlite3.h>

#include <fmt/format.h>

#include "kiln/error.h"

namespace kiln::track {

SqliteDb::SqliteDb(const std::filesystem::path& path, Mode mode, int busy_timeout_ms)
    : path_(path) {
  int flags =
      mode == Mode::kReadOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
  // FULLMUTEX is not needed: each connection is used by one thread at a time.
  flags |= SQLITE_OPEN_NOMUTEX;
  int code = sqlite3_open_v2(path.c_str(), &db_, flags, nullptr);
  if (code != SQLITE_OK) {
    std::string reason = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(code);
    sqlite3_close(db_);
    db_ = nullptr;
    fail(kUnknownSite, fmt::format("run catalog {}: cannot open: {}", path.string(), reason));
  }
  sqlite3_extended_result_codes(db_, 1);
  sqlite3_busy_timeout(db_, busy_timeout_ms);
}

SqliteDb::SqliteDb(SqliteDb&& other) noexcept : path_(std::move(other.path_)), db_(other.db_) {
  other.db_ = nullptr;
}

SqliteDb::~SqliteDb() {
  sqlite3_close(db_);
}

void SqliteDb::fail_with(std::string_view what, int code) const {
  std::string reason = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(code);
  std::string hint;
  int primary = code & 0xff;
  if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED) {
    hint =
        "another process holds the catalog's write lock; the run's directory is complete "
        "either way, and `kiln runs reindex` rebuilds the catalog from the run directories";
  } else if (primary == SQLITE_NOTADB || primary == SQLITE_CORRUPT) {
    hint = fmt::format(
        "move {} aside and run `kiln runs reindex`: the catalog is an index of the "
        "run directories, which keep everything",
        path_.string());
  }
  fail(kUnknownSite, fmt::format("run catalog {}: {}: {}", path_.string(), what, reason), hint);
}

void SqliteDb::execute(std::string_view sql, std::string_view what) {
  std::string text(sql);
  int code = sqlite3_exec(db_, text.c_str(), nullptr, nullptr, nullptr);
  if (code != SQLITE_OK) {
    fail_with(what.empty() ? std::string_view(text).substr(0, text.find_first_of("(\n")) : what,
              code);
  }
}

SqliteStatement SqliteDb::prepare(std::string_view sql) {
  sqlite3_stmt* statement = nullptr;
  int code = sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &statement, nullptr);
  if (code != SQLITE_OK) fail_with(sql.substr(0, sql.find_first_of("(\n")), code);
  return SqliteStatement(*this, statement);
}

int64_t SqliteDb::changes() const {
  return sqlite3_changes64(db_);
}

SqliteStatement::SqliteStatement(SqliteStatement&& other) noexcept
    : db_(other.db_), statement_(other.statement_) {
  other.statement_ = nullptr;
}

SqliteStatement::~SqliteStatement() {
  sqlite3_finalize(statement_);
}

SqliteStatement& SqliteStatement::bind(int index, std::string_view text) {
  int code = sqlite3_bind_text(statement_, index, text.data(), static_cast<int>(text.size()),
                               SQLITE_TRANSIENT);
  if (code != SQLITE_OK) db_->fail_with("bind", code);
  return *this;
}

SqliteStatement& SqliteStatement::bind(int index, int64_t value) {
  int code = sqlite3_bind_int64(statement_, index, value);
  if (code != SQLITE_OK) db_->fail_with("bind", code);
  return *this;
}

SqliteStatement& SqliteStatement::bind(int index, double value) {
  int code = sqlite3_bind_double(statement_, index, value);
  if (code != SQLITE_OK) db_->fail_with("bind", code);
  return *this;
}

SqliteStatement& SqliteStatement::bind_null(int index) {
  int code = sqlite3_bind_null(statement_, index);
  if (code != SQLITE_OK) db_->fail_with("bind", code);
  return *this;
}

bool SqliteStatement::step() {
  int code = sqlite3_step(statement_);
  if (code == SQLITE_ROW) return true;
  if (code == SQLITE_DONE) return false;
  std::string sql = sqlite3_sql(statement_);
  sqlite3_reset(statement_);
  db_->fail_with(sql.substr(0, sql.find_first_of("(\n")), code);
}

void SqliteStatement::run() {
  while (step()) {
  }
  reset();
}

void SqliteStatement::reset() {
  sqlite3_reset(statement_);
  sqlite3_clear_bindings(statement_);
}

std::string SqliteStatement::text(int column) const {
  const unsigned char* value = sqlite3_column_text(statement_, column);
  return value ? std::string(reinterpret_cast<const char*>(value),
                             static_cast<size_t>(sqlite3_column_bytes(statement_, column)))
               : std::string();
}

std::optional<std::string> SqliteStatement::optional_text(int column) const {
  if (is_null(column)) return std::nullopt;
  return text(column);
}

int64_t SqliteStatement::integer(int column) const {
  return sqlite3_column_int64(statement_, column);
}

double SqliteStatement::real(int column) const {
  return sqlite3_column_double(statement_, column);
}

bool SqliteStatement::is_null(int column) const {
  return sqlite3_column_type(statement_, column) == SQLITE_NULL;
}

SqliteTransaction::SqliteTransaction(SqliteDb& db) : db_(db) {
  db_.execute("BEGIN IMMEDIATE", "taking the write lock");
}

SqliteTransaction::~SqliteTransaction() {
  if (!open_) return;
  try {
    db_.execute("ROLLBACK");
  } catch (...) {
    // The connection's error is already being reported; a failed rollback leaves the
    // transaction to SQLite, which rolls it back when the connection closes.
  }
}

void SqliteTransaction::commit() {
  db_.execute("COMMIT");
  open_ = false;
}

}  // namespace kiln::track
