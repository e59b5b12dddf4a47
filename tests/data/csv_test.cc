// read_csv: header and records, RFC 4180 quoting (delimiters, quotes and line breaks inside
// quotes), CRLF, blank lines, missing and unparsable cells with their record and line,
// malformed rows collected with their record, and the errors that stop reading.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>

#include "data/csv.h"
#include "support/errors.h"
#include "support/scratch_dir.h"

namespace kiln::data {
namespace {

using ::kiln::testing::fails_with;
using ::kiln::testing::ScratchDir;
using ::testing::ElementsAre;

TEST(ReadCsv, ReadsHeaderAndQuotedFields) {
  ScratchDir dir;
  auto path = write_text(dir, "a.csv",
                         "x, y ,name\r\n1,2,plain\r\n3,4,\"with, comma\"\n\n5,6,\"say \"\"hi\"\"\n"
                         "next line\"\n");
  CsvTable table = read_csv(path);
  EXPECT_THAT(table.columns, ElementsAre("x", "y", "name"));
  ASSERT_EQ(table.rows.size(), 3u);
  EXPECT_EQ(table.rows[1][2], "with, comma");
  EXPECT_EQ(table.rows[2][2], "say \"hi\"\nnext line");
  EXPECT_THAT(table.lines, ElementsAre(2, 3, 5));
  EXPECT_THAT(table.records, ElementsAre(0, 1, 2));
  EXPECT_TRUE(table.malformed.empty());
  EXPECT_EQ(table.column("y"), 1u);
  EXPECT_TRUE(fails_with([&] { table.column("nme"); },
                         {"a.csv", "no column 'nme'", "did you mean 'name'?"}));
}

TEST(ReadCsv, NumericColumnsNameMissingAndBadCells) {
  ScratchDir dir;
  auto path = write_text(dir, "n.csv", "a,b\n1.5,2\n,3\nNA,x7\n-2e3,+4\n");
  CsvTable table = read_csv(path);
  std::vector<CsvCellProblem> problems;
  std::vector<double> a = numeric_column(table, 0, {}, problems);
  EXPECT_EQ(a[0], 1.5);
  EXPECT_TRUE(std::isnan(a[1]));
  EXPECT_EQ(a[3], -2000);
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_EQ(problems[0].row, 1u);
  EXPECT_TRUE(problems[0].missing);
  EXPECT_EQ(problems[1].row, 2u);
  problems.clear();
  std::vector<double> b = numeric_column(table, 1, {}, problems);
  EXPECT_EQ(b[3], 4);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_FALSE(problems[0].missing);
  EXPECT_EQ(problems[0].text, "x7");
}

TEST(ReadCsv, CollectsRowsWithTheWrongNumberOfFields) {
  ScratchDir dir;
  auto path = write_text(dir, "m.csv", "a,b,c\n1,2,3\n4,5\n6,7,8,9\n10,11,12\n");
  CsvTable table = read_csv(path);
  EXPECT_EQ(table.rows.size(), 2u);
  EXPECT_THAT(table.records, ElementsAre(0, 3));
  ASSERT_EQ(table.malformed.size(), 2u);
  EXPECT_EQ(table.malformed[0].record, 1);
  EXPECT_EQ(table.malformed[0].line, 3);
  EXPECT_EQ(table.malformed[0].problem, "2 fields, the header has 3");
  EXPECT_EQ(table.malformed[1].record, 2);
}

// scikit-learn's bundled files: a line of counts, then records without a header.
TEST(ReadCsv, SkipsLinesAndNamesHeaderlessColumnsByPosition) {
  ScratchDir dir;
  auto path = write_text(dir, "s.csv", "3,2,a,b\n1.5,2,0\n3,4,1\n\"5\",6,1,9\n");
  CsvOptions options;
  options.skip_lines = 1;
  options.header = false;
  CsvTable table = read_csv(path, options);
  EXPECT_THAT(table.columns, ElementsAre("0", "1", "2"));
  ASSERT_EQ(table.rows.size(), 2u);
  EXPECT_EQ(table.rows[0][0], "1.5");
  EXPECT_THAT(table.lines, ElementsAre(2, 3));
  ASSERT_EQ(table.malformed.size(), 1u);
  EXPECT_EQ(table.malformed[0].line, 4);
  EXPECT_EQ(table.malformed[0].record, 2);
  options.skip_lines = 10;
  EXPECT_TRUE(
      fails_with([&] { read_csv(path, options); }, {"s.csv", "is empty; expected records"}));
}

TEST(ReadCsvRecords, PicksTheNamedColumnsInTheirOrderAsF64Records) {
  ScratchDir dir;
  auto path = write_text(dir, "r.csv", "label,b,a\n0,2.5,-1\n1,+3,1e2\n");
  RawArray records = read_csv_records(path, {}, {"a", "b"});
  EXPECT_EQ(records.dtype, DType::f64);
  EXPECT_THAT(records.shape, ElementsAre(2, 2));
  std::vector<double> values(4);
  std::memcpy(values.data(), records.bytes.data(), records.bytes.size());
  EXPECT_THAT(values, ElementsAre(-1, 2.5, 100, 3));
  CsvOptions headerless;
  headerless.header = false;
  headerless.skip_lines = 1;
  RawArray by_position = read_csv_records(path, headerless, {"1"});
  EXPECT_THAT(by_position.shape, ElementsAre(2, 1));
}

TEST(ReadCsvRecords, RefusesWhatItWouldHaveToGuess) {
  ScratchDir dir;
  auto missing = write_text(dir, "m.csv", "a,b\n1,2\n3,\n");
  EXPECT_TRUE(fails_with(
      [&] {
        read_csv_records(missing, {}, {"a", "b"});
      },
      {"m.csv' line 3 (record 1), column 'b': no value"}));
  auto text = write_text(dir, "t.csv", "a,b\n1,two\n");
  EXPECT_TRUE(fails_with([&] { read_csv_records(text, {}, {"b"}); },
                         {"line 2 (record 0), column 'b': 'two' is not a number"}));
  auto ragged = write_text(dir, "g.csv", "a,b\n1,2\n3\n4,5,6\n");
  EXPECT_TRUE(fails_with([&] { read_csv_records(ragged, {}, {"a"}); },
                         {"g.csv' line 3 (record 1)", "and 1 more malformed rows"}));
  EXPECT_TRUE(fails_with([&] { read_csv_records(missing, {}, {"c"}); }, {"no column 'c'"}));
}

TEST(ReadCsv, StopsAtFilesItCannotRead) {
  ScratchDir dir;
  EXPECT_TRUE(fails_with([&] { read_csv(dir / "none.csv"); }, {"none.csv", "does not exist"}));
  EXPECT_TRUE(fails_with([&] { read_csv(write_text(dir, "e.csv", "")); }, {"e.csv", "is empty"}));
  EXPECT_TRUE(fails_with([&] { read_csv(write_text(dir, "q.csv", "a,b\n1,\"open\n2,3\n")); },
                         {"q.csv", "the quote opened on line 2 is never closed"}));
  EXPECT_TRUE(fails_with([&] { read_csv(write_text(dir, "u.csv", "a,b\n1,ab\"c\n")); },
                         {"u.csv", "line 2: a quote inside an unquoted field"}));
  EXPECT_TRUE(fails_with([&] { read_csv(write_text(dir, "t.csv", "a,b\n1,\"x\"y\n")); },
                         {"t.csv", "line 2: text after a closing quote"}));
  EXPECT_TRUE(fails_with([&] { read_csv(write_text(dir, "d.csv", "a,b,a\n1,2,3\n")); },
                         {"d.csv", "column 'a' appears twice"}));
}

}  // namespace
}  // namespace kiln::data
