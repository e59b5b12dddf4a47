// CSV files through read_csv and numeric_column (the reader of data.dataset = "csv"). The
// first input byte picks the options: bit 0 a header row, bits 1-2 the delimiter (',', ';',
// tab, '|'), bit 3 one skipped line; the rest is the file. Properties: every row has as
// many cells as there are columns, each with its record index and line, records and lines
// increase, and every column converts to one number per row, its problems naming rows that
// exist.
#include <cstdint>
#include <vector>

#include "data/csv.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static kiln::fuzz::InputFile input(".csv");
  kiln::data::CsvOptions options;
  options.header = (data[0] & 1) != 0;
  options.delimiter = ",;\t|"[(data[0] >> 1) & 3];
  options.skip_lines = (data[0] >> 3) & 1;
  const auto& path = input.write(data + 1, size - 1);
  kiln::data::CsvTable table;
  if (!kiln::fuzz::parses([&] { table = kiln::data::read_csv(path, options); })) return 0;
  size_t rows = table.rows.size();
  if (table.records.size() != rows || table.lines.size() != rows) {
    kiln::fuzz::finding("read_csv: records or lines do not match the rows");
  }
  for (size_t r = 0; r < rows; ++r) {
    if (table.rows[r].size() != table.columns.size()) {
      kiln::fuzz::finding("read_csv kept a row with a different number of cells than columns");
    }
    if (r > 0 &&
        (table.records[r] <= table.records[r - 1] || table.lines[r] <= table.lines[r - 1])) {
      kiln::fuzz::finding("read_csv: record indices or lines do not increase");
    }
  }
  for (size_t column = 0; column < table.columns.size(); ++column) {
    std::vector<kiln::data::CsvCellProblem> problems;
    std::vector<double> values = kiln::data::numeric_column(table, column, options, problems);
    if (values.size() != rows) kiln::fuzz::finding("numeric_column: not one value per row");
    for (const auto& problem : problems) {
      if (problem.row >= rows) kiln::fuzz::finding("numeric_column named a row that is not there");
    }
  }
  return 0;
}
