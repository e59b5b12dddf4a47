// Reader for CSV files (RFC 4180: a header row, fields separated by a delimiter, quoted
// with '"' when they hold the delimiter, a quote or a line break, '""' for a quote inside
// quotes; LF or CRLF line ends). Cells stay text here; typed columns are read from them
// with the record index and line of every cell that is missing or not a number.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "data/raw_array.h"

namespace kiln::data {

struct CsvOptions {
  char delimiter = ',';
  // Whether the first row (after skip_lines) names the columns; without a header they are
  // named by position: "0", "1", ...
  bool header = true;
  // Lines skipped before the header or the first record (scikit-learn's bundled CSVs open
  // with a line of counts).
  int64_t skip_lines = 0;
  // Cells that mean "no value" (compared after trimming spaces).
  std::vector<std::string> missing = {"", "NA", "N/A", "nan", "NaN", "null"};
};

// A record that does not fit the table (a different number of fields than the header).
struct CsvMalformedRow {
  int64_t record = 0;  // 0-based, counting every data row of the file
  int64_t line = 0;    // 1-based line where the row starts
  std::string problem;
};

struct CsvTable {
  std::string file;
  std::vector<std::string> columns;            // the header
  std::vector<std::vector<std::string>> rows;  // well-formed records, columns.size() cells
  std::vector<int64_t> records;                // each row's record index (malformed ones skipped)
  std::vector<int64_t> lines;                  // each row's first line
  std::vector<CsvMalformedRow> malformed;

  // The column's index; an unknown name is a kiln::Error listing the columns.
  size_t column(std::string_view name) const;
};

// A cell of a numeric column that is missing or not a number.
struct CsvCellProblem {
  size_t row = 0;  // index into CsvTable::rows
  bool missing = false;
  std::string text;
};

// Reads `path`. A missing file, an empty file (no header or no first record), an unterminated quote
// or a quote inside an unquoted field is a kiln::Error naming the file and line; rows with the
// wrong number of fields are collected in `malformed`.
CsvTable read_csv(const std::filesystem::path& path, const CsvOptions& options = {});

// The column as numbers (missing and unparsable cells become NaN and are listed in
// `problems`).
std::vector<double> numeric_column(const CsvTable& table, size_t column, const CsvOptions& options,
                                   std::vector<CsvCellProblem>& problems);

// The named numeric `columns` of the CSV file at `path`, as f64 records [rows, columns]:
// records laid out like a model's training data, to predict on. Other columns (a label)
// are ignored. An unknown column, a malformed row, or a cell that is missing or not a
// number is a kiln::Error naming the file, line and column: a prediction is never made
// from a guessed value.
RawArray read_csv_records(const std::filesystem::path& path, const CsvOptions& options,
                          const std::vector<std::string>& columns);

}  // namespace kiln::data
