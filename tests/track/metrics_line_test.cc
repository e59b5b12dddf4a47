// metrics.jsonl's codec (track/metrics_line.h): lines write and read back, non-finite
// numbers survive as text, a torn last line is left out, any other bad line is an error
// naming the file and the line, and the metric points are a line's numbers.
#include "track/metrics_line.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <string>

#include "support/errors.h"
#include "support/scratch_dir.h"

namespace kiln::track {
namespace {

using kiln::testing::fails_with;
using kiln::testing::ScratchDir;

MetricsLine train_line(int64_t step, double loss) {
  MetricsLine line;
  line.kind = "train";
  line.step = step;
  line.epoch = 1;
  line.time = 1796608113.305;
  line.values = {{"loss", loss}, {"lr", 0.001}};
  return line;
}

TEST(MetricsLine, WritesSortedKeysAndNonFiniteNumbersAsText) {
  EXPECT_EQ(metrics_line_text(train_line(3, 0.5)),
            R"({"epoch":1,"kind":"train","loss":0.5,"lr":0.001,"step":3,"time":1796608113.305})");
  MetricsLine skipped;
  skipped.kind = "nonfinite";
  skipped.step = 4;
  skipped.epoch = 1;
  skipped.values = {{"loss", NAN}, {"grad", -INFINITY}};
  skipped.texts = {{"action", "skipped"}};
  skipped.lists = {{"nonfinite_gradients", {"dense_1/w", "dense_1/b"}}};
  EXPECT_EQ(metrics_line_text(skipped),
            R"({"action":"skipped","epoch":1,"grad":"-inf","kind":"nonfinite","loss":"nan",)"
            R"("nonfinite_gradients":["dense_1/w","dense_1/b"],"step":4})");
}

TEST(MetricsLine, LinesReadBackAsTheyWereWritten) {
  MetricsLine odd = train_line(2, INFINITY);
  odd.texts = {{"note", "nan is a word here"}};
  odd.lists = {{"names", {"a"}}};
  std::string text = metrics_line_text(train_line(1, 0.25)) + "\n" + metrics_line_text(odd) + "\n";
  MetricsFile file = parse_metrics_lines(text, "metrics.jsonl");
  ASSERT_EQ(file.lines.size(), 2u);
  EXPECT_FALSE(file.torn_last_line);
  EXPECT_EQ(file.lines[0].kind, "train");
  EXPECT_EQ(file.lines[0].step, 1);
  EXPECT_EQ(file.lines[0].epoch, 1);
  EXPECT_EQ(file.lines[0].time, 1796608113.305);
  EXPECT_EQ(file.lines[0].values, (std::map<std::string, double>{{"loss", 0.25}, {"lr", 0.001}}));
  EXPECT_EQ(file.lines[1].values.at("loss"), INFINITY);
  EXPECT_EQ(file.lines[1].texts.at("note"), "nan is a word here");
  EXPECT_EQ(file.lines[1].lists.at("names"), std::vector<std::string>{"a"});
}

TEST(MetricsLine, ATornLastLineIsLeftOutAndSaidSo) {
  std::string text = metrics_line_text(train_line(1, 0.25)) + "\n{\"kind\":\"tra";
  MetricsFile file = parse_metrics_lines(text, "metrics.jsonl");
  EXPECT_EQ(file.lines.size(), 1u);
  EXPECT_TRUE(file.torn_last_line);
}

TEST(MetricsLine, AnyOtherBadLineIsAnErrorNamingTheFileAndLine) {
  std::string good = metrics_line_text(train_line(1, 0.25)) + "\n";
  EXPECT_TRUE(fails_with([&] { parse_metrics_lines("{\"kind\":\n" + good, "m.jsonl"); },
                         {"m.jsonl:1: not a JSON record", "only the last line may be torn"}));
  EXPECT_TRUE(fails_with([&] { parse_metrics_lines(good + "[1, 2]\n", "m.jsonl"); },
                         {"m.jsonl:2: not a metrics record (a JSON object)"}));
  EXPECT_TRUE(
      fails_with([&] { parse_metrics_lines(good + R"({"kind":"eval","step":"3"})", "m.jsonl"); },
                 {"m.jsonl:2: a \"eval\" record without an integer \"step\""}));
  // Lines of kinds that are not drawn need no step.
  EXPECT_EQ(parse_metrics_lines(good + R"({"kind":"note"})", "m.jsonl").lines.size(), 2u);
}

TEST(MetricsLine, AMissingFileIsNoLines) {
  ScratchDir dir;
  EXPECT_TRUE(read_metrics_file(dir.path()).lines.empty());
  std::ofstream(dir / "metrics.jsonl") << metrics_line_text(train_line(7, 1.0)) << "\n";
  EXPECT_EQ(read_metrics_file(dir.path()).lines.at(0).step, 7);
}

TEST(MetricsLine, PointsAreATrainOrEvalLinesNumbersAtItsTime) {
  std::vector<MetricPoint> points = metric_points(train_line(5, 0.5));
  ASSERT_EQ(points.size(), 2u);
  EXPECT_EQ(points[0].key, "train/loss");
  EXPECT_EQ(points[0].step, 5);
  EXPECT_EQ(points[0].value, 0.5);
  EXPECT_EQ(points[0].wall_time, 1796608113.305);
  EXPECT_EQ(points[1].key, "train/lr");
  MetricsLine skipped = train_line(6, NAN);
  skipped.kind = "nonfinite";
  EXPECT_TRUE(metric_points(skipped).empty());
}

}  // namespace
}  // namespace kiln::track
