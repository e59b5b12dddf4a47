// A thin RAII layer over SQLite's C API for the run catalog: a connection and prepared
// statements with typed binds and reads. Every failure is a kiln::Error that names the
// database file and carries SQLite's own message ("database is locked", "file is not a
// database"), so that a catalog problem reads as one.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

struct sqlite3;
struct sqlite3_stmt;

namespace kiln::track {

class SqliteStatement;

class SqliteDb {
 public:
  enum class Mode { kReadWrite, kReadOnly };
  // Opens (kReadWrite: creating) the database at `path`, waiting up to `busy_timeout_ms` for
  // another writer's lock before an operation fails with "database is locked".
  SqliteDb(const std::filesystem::path& path, Mode mode, int busy_timeout_ms);
  SqliteDb(SqliteDb&& other) noexcept;
  SqliteDb& operator=(SqliteDb&&) = delete;
  ~SqliteDb();

  // Runs one or more statements that take no parameters and return no rows; an error names
  // the operation as `what` (by default the start of the SQL).
  void execute(std::string_view sql, std::string_view what = {});
  SqliteStatement prepare(std::string_view sql);
  int64_t changes() const;
  const std::filesystem::path& path() const { return path_; }
  // Throws the error of the last failed call, with `what` as the operation's name.
  [[noreturn]] void fail_with(std::string_view what, int code) const;

 private:
  friend class SqliteStatement;
  std::filesystem::path path_;
  sqlite3* db_ = nullptr;
};

class SqliteStatement {
 public:
  SqliteStatement(SqliteStatement&& other) noexcept;
  SqliteStatement& operator=(SqliteStatement&&) = delete;
  ~SqliteStatement();

  // Binds by 1-based position; returns *this so that binds chain.
  SqliteStatement& bind(int index, std::string_view text);
  SqliteStatement& bind(int index, int64_t value);
  SqliteStatement& bind(int index, double value);
  SqliteStatement& bind_null(int index);
  // Advances to the next row: true when there is one, false when the statement is done.
  bool step();
  // Runs a statement that returns no rows, then resets it for the next binds.
  void run();
  void reset();

  std::string text(int column) const;
  std::optional<std::string> optional_text(int column) const;
  int64_t integer(int column) const;
  double real(int column) const;
  bool is_null(int column) const;

 private:
  friend class SqliteDb;
  SqliteStatement(SqliteDb& db, sqlite3_stmt* statement) : db_(&db), statement_(statement) {}
  SqliteDb* db_;
  sqlite3_stmt* statement_;
};

// BEGIN IMMEDIATE ... COMMIT, rolled back when destroyed without commit() (an exception).
// IMMEDIATE takes the write lock at the start, so a busy database fails (after the busy
// timeout) before any work rather than in the middle of it.
class SqliteTransaction {
 public:
  explicit SqliteTransaction(SqliteDb& db);
  SqliteTransaction(const SqliteTransaction&) = delete;
  SqliteTransaction& operator=(const SqliteTransaction&) = delete;
  ~SqliteTransaction();
  void commit();

 private:
  SqliteDb& db_;
  bool open_ = true;
};

}  // namespace kiln::track
