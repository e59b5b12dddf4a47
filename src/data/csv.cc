// CSV reader (csv.h): a single pass over the file's bytes with a three-state machine
// (start of field, unquoted, quoted); fields are copied once into their row.
#include "data/csv.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/edit_distance.h"
#include "kiln/error.h"

namespace kiln::data {
namespace {

namespace fs = std::filesystem;

[[noreturn]] void fail_csv(const std::string& file, std::string_view what, std::string hint = {}) {
  fail(kUnknownSite, fmt::format("read_csv: '{}': {}", file, what), std::move(hint));
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

// Splits the text into rows of fields, each with the line it starts on.
struct RawRow {
  std::vector<std::string> fields;
  int64_t line = 0;
};

std::vector<RawRow> split_rows(std::string_view text, char delimiter, const std::string& file,
                               int64_t first_line) {
  std::vector<RawRow> rows;
  RawRow row;
  std::string field;
  int64_t line = first_line;
  row.line = first_line;
  bool in_quotes = false;
  bool field_was_quoted = false;
  bool row_has_content = false;
  int64_t quote_line = 0;
  auto end_field = [&] {
    row.fields.push_back(std::move(field));
    field.clear();
    field_was_quoted = false;
  };
  auto end_row = [&] {
    end_field();
    // A blank line (one empty, unquoted field) is not a record.
    if (row_has_content) rows.push_back(std::move(row));
    row = RawRow{};
    row.line = line + 1;
    row_has_content = false;
  };
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_quotes) {
      if (c == '"') {
        if (i + 1 < text.size() && text[i + 1] == '"') {
          field += '"';
          ++i;
        } else {
          in_quotes = false;
        }
      } else {
        if (c == '\n') ++line;
        field += c;
      }
      continue;
    }
    if (c == '"') {
      if (!trim(field).empty() || field_was_quoted) {
        fail_csv(file, fmt::format("line {}: a quote inside an unquoted field ({:?}); quote the "
                                   "whole field and double the quotes inside it",
                                   line, field + c));
      }
      field.clear();
      in_quotes = true;
      field_was_quoted = true;
      row_has_content = true;
      quote_line = line;
    } else if (c == delimiter) {
      end_field();
      row_has_content = true;
    } else if (c == '\n' || c == '\r') {
      if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      end_row();
      ++line;
    } else {
      if (field_was_quoted && c != ' ' && c != '\t') {
        fail_csv(file, fmt::format("line {}: text after a closing quote", line));
      }
      field += c;
      if (c != ' ' && c != '\t') row_has_content = true;
    }
  }
  if (in_quotes) {
    fail_csv(file, fmt::format("the quote opened on line {} is never closed", quote_line));
  }
  if (row_has_content || !field.empty()) end_row();
  return rows;
}

bool is_missing(std::string_view cell, const CsvOptions& options) {
  cell = trim(cell);
  for (const std::string& token : options.missing) {
    if (cell == token) return true;
  }
  return false;
}

}  // namespace

size_t CsvTable::column(std::string_view name) const {
  for (size_t i = 0; i < columns.size(); ++i) {
    if (columns[i] == name) return i;
  }
  std::vector<std::string_view> names(columns.begin(), columns.end());
  std::string_view guess = closest_match(name, names);
  fail(kUnknownSite,
       fmt::format("'{}': no column '{}'{}", file, name,
                   guess.empty() ? "" : fmt::format("; did you mean '{}'?", guess)),
       fmt::format("the header has: {}", fmt::join(columns, ", ")));
}

CsvTable read_csv(const fs::path& path, const CsvOptions& options) {
  std::string file = path.string();
  std::error_code code;
  if (!fs::is_regular_file(path, code)) {
    fail_csv(file, fs::exists(path, code) ? "not a regular file" : "does not exist");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) fail_csv(file, "cannot be opened");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) fail_csv(file, "read failed");
  std::string_view body = text;
  for (int64_t skipped = 0; skipped < options.skip_lines; ++skipped) {
    size_t end = body.find('\n');
    body = end == std::string_view::npos ? std::string_view() : body.substr(end + 1);
  }
  std::vector<RawRow> rows = split_rows(body, options.delimiter, file, options.skip_lines + 1);
  if (rows.empty()) {
    fail_csv(file, options.header ? "is empty; expected a header row and records"
                                  : "is empty; expected records");
  }
  CsvTable table;
  table.file = file;
  if (options.header) {
    for (std::string& name : rows[0].fields) table.columns.emplace_back(trim(name));
  } else {
    // No header: the first record fixes the number of columns, and stays a record.
    for (size_t i = 0; i < rows[0].fields.size(); ++i) table.columns.push_back(std::to_string(i));
    rows.insert(rows.begin(), RawRow{});
  }
  for (size_t i = 0; i < table.columns.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (table.columns[i] == table.columns[j]) {
        fail_csv(file,
                 fmt::format("line 1: column '{}' appears twice in the header", table.columns[i]));
      }
    }
  }
  for (size_t r = 1; r < rows.size(); ++r) {
    auto record = static_cast<int64_t>(r - 1);
    if (rows[r].fields.size() != table.columns.size()) {
      table.malformed.push_back({record, rows[r].line,
                                 fmt::format("{} fields, the header has {}", rows[r].fields.size(),
                                             table.columns.size())});
      continue;
    }
    table.rows.push_back(std::move(rows[r].fields));
    table.records.push_back(record);
    table.lines.push_back(rows[r].line);
  }
  return table;
}

std::vector<double> numeric_column(const CsvTable& table, size_t column, const CsvOptions& options,
                                   std::vector<CsvCellProblem>& problems) {
  std::vector<double> values(table.rows.size());
  for (size_t row = 0; row < table.rows.size(); ++row) {
    const std::string& cell = table.rows[row][column];
    if (is_missing(cell, options)) {
      values[row] = std::numeric_limits<double>::quiet_NaN();
      problems.push_back({row, true, cell});
      continue;
    }
    std::string_view text = trim(cell);
    if (!text.empty() && text.front() == '+') text.remove_prefix(1);
    double value = 0;
    auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc() || end != text.data() + text.size()) {
      values[row] = std::numeric_limits<double>::quiet_NaN();
      problems.push_back({row, false, cell});
      continue;
    }
    values[row] = value;
  }
  return values;
}

RawArray read_csv_records(const std::filesystem::path& path, const CsvOptions& options,
                          const std::vector<std::string>& columns) {
  CsvTable table = read_csv(path, options);
  if (!table.malformed.empty()) {
    const CsvMalformedRow& row = table.malformed.front();
    fail(
        kUnknownSite,
        fmt::format("'{}' line {} (record {}): {}{}", table.file, row.line, row.record, row.problem,
                    table.malformed.size() > 1
                        ? fmt::format(" (and {} more malformed rows)", table.malformed.size() - 1)
                        : ""),
        "every record needs the header's number of fields");
  }
  const size_t rows = table.rows.size();
  std::vector<double> values(rows * columns.size());
  for (size_t c = 0; c < columns.size(); ++c) {
    size_t column = table.column(columns[c]);
    std::vector<CsvCellProblem> problems;
    std::vector<double> cells = numeric_column(table, column, options, problems);
    if (!problems.empty()) {
      const CsvCellProblem& problem = problems.front();
      fail(kUnknownSite,
           fmt::format(
               "'{}' line {} (record {}), column '{}': {}", table.file, table.lines[problem.row],
               table.records[problem.row], columns[c],
               problem.missing ? "no value" : fmt::format("'{}' is not a number", problem.text)),
           "a record to predict on needs a number in every feature column");
    }
    for (size_t row = 0; row < rows; ++row) values[row * columns.size() + c] = cells[row];
  }
  RawArray records;
  records.dtype = DType::f64;
  records.shape = {static_cast<int64_t>(rows), static_cast<int64_t>(columns.size())};
  records.bytes.resize(values.size() * sizeof(double));
  std::memcpy(records.bytes.data(), values.data(), records.bytes.size());
  records.file = table.file;
  return records;
}

}  // namespace kiln::data
