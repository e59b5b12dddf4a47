// `kiln report`: the page rendered from hand-made runs (escaping, non-finite values, empty
// and one-point metrics, several runs overlaid, the optional sections, determinism), the
// chart scales, and loading run directories (torn lines, errors naming file and line).
// tests/tools/report_in_chromium.py renders a real run's report in a browser.
#include "track/report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "support/errors.h"
#include "support/scratch_dir.h"
#include "track/report_svg_frame.h"

namespace kiln::track {
namespace {

using kiln::testing::fails_with;
using kiln::testing::ScratchDir;
using ::testing::HasSubstr;
using ::testing::Not;

size_t count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

// The <svg> element of one plot, or "" when the page has none.
std::string plot(const std::string& page, const std::string& name) {
  size_t begin = page.find("data-plot=\"" + name + "\"");
  if (begin == std::string::npos) return "";
  begin = page.rfind("<svg", begin);
  return page.substr(begin, page.find("</svg>", begin) + 6 - begin);
}

// The value of attribute `name` of the first element that starts with `element`.
std::string attribute(const std::string& text, const std::string& element,
                      const std::string& name) {
  size_t at = text.find(element);
  if (at == std::string::npos) return "";
  at = text.find(" " + name + "=\"", at);
  if (at == std::string::npos) return "";
  at += name.size() + 3;
  return text.substr(at, text.find('"', at) - at);
}

MetricsLine metrics_line(std::string kind, int64_t step, int64_t epoch,
                         std::map<std::string, double> values) {
  MetricsLine line;
  line.kind = std::move(kind);
  line.step = step;
  line.epoch = epoch;
  line.values = std::move(values);
  return line;
}

MetricsLine train(int64_t step, double loss, double step_ms = 10) {
  return metrics_line("train", step, 1 + (step - 1) / 10,
                      {{"loss", loss}, {"lr", 1e-3}, {"step_ms", step_ms}});
}

MetricsLine eval(int64_t epoch, double test_accuracy) {
  return metrics_line("eval", epoch * 10, epoch,
                      {{"test_accuracy", test_accuracy},
                       {"train_accuracy", test_accuracy + 0.01},
                       {"test_loss", 1 - test_accuracy},
                       {"train_loss", 0.9 - test_accuracy}});
}

// run.json's section `key` (a report written whole, such as "timing") set to `value`.
void set_section(RunInfo& info, const std::string& key, const nlohmann::json& value) {
  info.sections[key] = value.dump();
}

RunData run(const std::string& id, int64_t steps = 20) {
  RunData run;
  run.info = parse_run_info(
      nlohmann::json{{"experiment", "mlp"},
                     {"run_id", id},
                     {"status", "completed"},
                     {"started_at", "2026-12-02T10:00:00Z"},
                     {"finished_at", "2026-12-02T10:01:00Z"},
                     {"seconds", 60.5},
                     {"first_step_seconds", 0.7},
                     {"jit", {{"compiles", 2}, {"compile_seconds", 0.3}}},
                     {"final", {{"test_accuracy", 0.85}, {"test_loss", 0.4}}},
                     {"environment", {{"cpu", {{"model", "AMD EPYC"}, {"cores", 2}}}}}}
          .dump(),
      "run.json");
  run.config_toml = "[optim]\nlr = 0.001\n";
  for (int64_t step = 1; step <= steps; ++step) {
    run.metrics.push_back(
        train(step, 2.0 / static_cast<double>(step), step == 1 ? 0 : 9 + step % 3));
    if (step % 10 == 0)
      run.metrics.push_back(eval(step / 10, 0.7 + 0.05 * static_cast<double>(step / 10)));
  }
  return run;
}

TEST(ReportRender, EveryPlotHasData) {
  std::string page = render_report({run("a")});
  EXPECT_THAT(page, HasSubstr("<h1>kiln report: mlp/a</h1>"));
  EXPECT_THAT(page, HasSubstr("85.00 %"));
  for (const char* name : {"train_loss", "accuracy", "eval_loss", "learning_rate"}) {
    EXPECT_THAT(plot(page, name), HasSubstr("<path class=\"series\"")) << name;
  }
  EXPECT_THAT(plot(page, "step_time"), HasSubstr("<rect class=\"bar\"")) << "step_time";
  EXPECT_THAT(plot(page, "time_breakdown"), HasSubstr("<rect class=\"bar\""));
  EXPECT_EQ(count(plot(page, "time_breakdown"), "class=\"bar\""), 3);  // run, first step, jit
  EXPECT_THAT(page, HasSubstr("<pre class=\"config\">[optim]\nlr = 0.001\n</pre>"));
  EXPECT_THAT(page, HasSubstr("environment.cpu.model"));
  EXPECT_THAT(page, Not(HasSubstr("<script")));
  EXPECT_THAT(page, Not(HasSubstr("http")));  // nothing to fetch
}

TEST(ReportRender, TelemetryDrawsALinePerLayerOnlyWhenThereIsSome) {
  EXPECT_THAT(render_report({run("a")}), Not(HasSubstr("id=\"telemetry\"")));
  RunData observed = run("b");
  for (int64_t step : {10, 20, 30}) {
    double s = static_cast<double>(step);
    observed.metrics.push_back(metrics_line("telemetry", step, 1,
                                            {{"dense_1/grad_norm", 1 / s},
                                             {"dense_10/grad_norm", 2 / s},
                                             {"relu_2/dead_fraction", s / 100},
                                             {"dense_1/update_ratio", 1e-3}}));
  }
  std::string page = render_report({observed});
  EXPECT_THAT(page, HasSubstr("id=\"telemetry\""));
  std::string grads = plot(page, "telemetry_grad_norm");
  EXPECT_EQ(count(grads, "<path class=\"series\""), 2);
  // In the model's order: dense_1 before dense_10 (not as text sorts them).
  EXPECT_LT(grads.find(">dense_1<"), grads.find(">dense_10<"));
  EXPECT_EQ(count(plot(page, "telemetry_dead"), "<path class=\"series\""), 1);
  EXPECT_EQ(plot(page, "telemetry_saturated"), "");  // no sigmoid or tanh: no chart
}

TEST(ReportRender, EscapesEveryTextFromTheRunsFiles) {
  RunData bad = run("<script>alert(1)</script>");
  bad.config_toml = "name = \"<script>alert('config')</script>\"\n";
  bad.info.error = "<img src=x onerror=alert(2)>";
  set_section(bad.info, "note\"><script>", "x");
  std::string page = render_report({bad, run("b")});
  EXPECT_THAT(page, Not(HasSubstr("<script")));
  EXPECT_THAT(page, Not(HasSubstr("<img")));
  EXPECT_THAT(page, HasSubstr("mlp/&lt;script&gt;alert(1)&lt;/script&gt;"));
  EXPECT_THAT(page, HasSubstr("name = &quot;&lt;script&gt;alert(&#39;config&#39;)&lt;/script&gt;"));
}

TEST(ReportRender, SkipsNonFinitePointsAndSaysHowMany) {
  RunData nan_run = run("a", 6);
  nan_run.metrics[2].values["loss"] = NAN;
  nan_run.metrics[4].values["loss"] = INFINITY;
  std::string chart = plot(render_report({nan_run}), "train_loss");
  std::string page = render_report({nan_run});
  EXPECT_THAT(chart, HasSubstr("<path class=\"series\""));
  EXPECT_THAT(chart, Not(HasSubstr("nan")));
  EXPECT_THAT(chart, Not(HasSubstr("inf")));
  // Steps 1-2, 4 and 6: the line breaks at each gap instead of joining over it.
  std::string d = chart.substr(chart.find(" d=\""), chart.find("\" stroke") - chart.find(" d=\""));
  EXPECT_EQ(count(d, "M"), 3) << d;
  EXPECT_THAT(page, HasSubstr("2 non-finite values (NaN or infinite) not drawn"));
}

TEST(ReportRender, EmptyMetricsSayNoData) {
  RunData empty = run("a", 0);
  std::string page = render_report({empty});
  for (const char* name : {"train_loss", "accuracy", "eval_loss", "step_time"}) {
    std::string chart = plot(page, name);
    EXPECT_THAT(chart, HasSubstr("no data")) << name;
    EXPECT_THAT(chart, Not(HasSubstr("class=\"series\""))) << name;
    EXPECT_THAT(chart, Not(HasSubstr("class=\"bar"))) << name;
  }
  EXPECT_THAT(page, HasSubstr("85.00 %"));  // run.json's final results still show
}

TEST(ReportRender, OnePointStillDraws) {
  RunData one = run("a", 0);
  one.info.final_metrics.reset();
  one.metrics = {train(2, 1.5, 12), eval(1, 0.8)};
  std::string page = render_report({one});
  std::string chart = plot(page, "train_loss");
  EXPECT_THAT(chart, HasSubstr("h0\""));  // a dot: the round cap of a zero-length line
  EXPECT_EQ(count(chart, "<circle class=\"point\""), 1);
  EXPECT_EQ(count(plot(page, "accuracy"), "<circle class=\"point\""), 2);  // test and train
  EXPECT_EQ(count(plot(page, "step_time"), "<rect class=\"bar\""), 1);
  EXPECT_THAT(page, HasSubstr("80.00 %"));  // no final results: the last evaluation
}

TEST(ReportRender, SeveralRunsOverlaidWithALegend) {
  std::string page = render_report({run("a"), run("b", 30)});
  std::string loss = plot(page, "train_loss");
  EXPECT_EQ(count(loss, "<path class=\"series\""), 2);
  std::string first = svg::palette_color(0), second = svg::palette_color(1);
  EXPECT_THAT(loss, HasSubstr("stroke=\"" + first + "\""));
  EXPECT_THAT(loss, HasSubstr("stroke=\"" + second + "\""));
  EXPECT_THAT(loss, HasSubstr("<g class=\"legend\">"));
  EXPECT_THAT(loss, HasSubstr(">mlp/a</text>"));
  EXPECT_THAT(loss, HasSubstr(">mlp/b</text>"));
  std::string accuracy = plot(page, "accuracy");
  EXPECT_EQ(count(accuracy, "<path class=\"series\""), 4);  // test and train of each
  EXPECT_THAT(accuracy, HasSubstr(">mlp/b train</text>"));
  std::string steps = plot(page, "step_time");
  EXPECT_THAT(steps, HasSubstr("fill=\"" + first + "\""));
  EXPECT_THAT(steps, HasSubstr("fill=\"" + second + "\""));
  EXPECT_EQ(count(plot(page, "final_accuracy"), "<rect class=\"bar\""), 2);
  EXPECT_THAT(page, HasSubstr("<h1>kiln report: 2 runs</h1>"));
  EXPECT_EQ(count(page, "<section class=\"run\""), 2);
}

TEST(ReportRender, StepTimesLeaveOutTheFirstStepAndSetTheSlowOnesApart) {
  RunData slow = run("a", 40);
  slow.metrics[5].values["step_ms"] = 900;  // an evaluation between epochs, say
  std::string page = render_report({slow});
  EXPECT_THAT(page, HasSubstr("39 values: median"));  // step 1 (0 ms) is not a step time
  std::string chart = plot(page, "step_time");
  EXPECT_EQ(count(chart, "<rect class=\"bar slow\""), 1);
  EXPECT_THAT(page, HasSubstr("the bar at the right counts the 1 value above"));
}

TEST(ReportRender, OptionalSectionsOnlyWhenPresent) {
  RunData plain = run("a");
  std::string page = render_report({plain});
  for (const char* title : {"<h3>Timing</h3>", "<h3>Roofline</h3>", "<h3>Memory</h3>"}) {
    EXPECT_THAT(page, Not(HasSubstr(title)));
  }
  RunData rich = run("a");
  set_section(rich.info, "timing", {{"forward_ms", 1.5}, {"phases", {{"backward_ms", 3.25}}}});
  // A roofline and memory report of another shape (another version's run.json) are shown
  // as they are, without charts.
  set_section(rich.info, "roofline",
              {{"ops", {{{"name", "matmul"}, {"flops", 1e9}}, {{"name", "add"}}}}});
  set_section(rich.info, "memory", {{"peak_bytes", 123456}});
  set_section(rich.info, "something_new", {{"answer", 42}});
  page = render_report({rich});
  EXPECT_THAT(page, HasSubstr("<h3>Timing</h3>"));
  EXPECT_THAT(page, HasSubstr("<th>phases.backward_ms</th><td>3.25</td>"));
  EXPECT_THAT(page, HasSubstr("<h3>Roofline</h3>"));
  EXPECT_THAT(page, HasSubstr("<h4>ops</h4>"));
  EXPECT_THAT(page, HasSubstr("<tr><th>flops</th><th>name</th></tr>\n"
                              "<tr><td>1e+09</td><td>matmul</td></tr>\n"
                              "<tr><td></td><td>add</td></tr>"));
  EXPECT_THAT(page, HasSubstr("<th>peak_bytes</th><td>123456</td>"));
  EXPECT_THAT(page, HasSubstr("<th>something_new.answer</th><td>42</td>"));  // not lost
  EXPECT_EQ(plot(page, "roofline"), "");
  EXPECT_EQ(plot(page, "memory"), "");
}

// run.json's "roofline" and "memory" as the step profiler writes them (docs/profiling.md).
RunData profiled_run() {
  RunData profiled = run("a");
  auto row = [](const char* name, double seconds, double flops, double bytes, const char* bound) {
    return nlohmann::json{{"name", name},
                          {"measured_seconds", seconds},
                          {"share_of_step", seconds / 0.05},
                          {"attainable_seconds", seconds / 2},
                          {"flops", flops},
                          {"bytes", bytes},
                          {"arithmetic_intensity", bytes > 0 ? flops / bytes : 0.0},
                          {"achieved_gflops", flops / seconds / 1e9},
                          {"achieved_gbs", bytes / seconds / 1e9},
                          {"bound", bound}};
  };
  set_section(profiled.info, "roofline",
              {{"step_seconds", 0.05},
               {"kernel_seconds", 0.045},
               {"outside_kernels_seconds", 0.005},
               {"attainable_seconds", 0.02},
               {"efficiency", 0.4},
               {"flops", 2.2e9},
               {"bytes", 1.5e8},
               {"arithmetic_intensity", 2.2e9 / 1.5e8},
               {"peak_gflops", 172.5},
               {"bandwidth_gbs", 24.8},
               {"peaks_measured_by", "kiln bench machine"},
               {"train_steps", 5},
               {"kernels", 40},
               {"top",
                {row("conv1/conv <script>", 0.02, 1.5e9, 2e7, "compute"),
                 row("fused: relu, add", 0.01, 1e6, 8e7, "memory"),
                 row("copy", 0.004, 0, 4e6, "overhead")}}});
  set_section(profiled.info, "memory",
              {{"estimate",
                {{"params", 4e6},
                 {"optimizer_state", 8e6},
                 {"other_inputs", 1e5},
                 {"constants", 0},
                 {"outputs", 1e3},
                 {"saved_activations", 2e7},
                 {"temporaries", 5e6},
                 {"total", 37101000}}},
               {"arena_bytes", 2.5e7},
               {"arena_peak_step", 17},
               {"observed_peak_bytes", 38000000},
               {"observed_minus_estimate_bytes", 899000}});
  return profiled;
}

TEST(ReportRender, RooflineChartPlacesEachKernelUnderTheRoof) {
  std::string page = render_report({profiled_run()});
  std::string chart = plot(page, "roofline");
  ASSERT_FALSE(chart.empty());
  // Two kernels with FLOPs and the whole step; the copy has no FLOPs for log axes.
  EXPECT_EQ(count(chart, "<circle class=\"point"), 3);
  EXPECT_EQ(count(chart, "<circle class=\"point step\""), 1);
  EXPECT_THAT(page, HasSubstr("1 kernel with no FLOPs (data movement only) not drawn"));
  EXPECT_EQ(count(chart, "<path class=\"roof\""), 1);
  EXPECT_THAT(chart, HasSubstr("ridge 6.95565 FLOP/B"));  // 172.5 / 24.8
  EXPECT_THAT(chart, HasSubstr("peak 172.5 GFLOP/s"));
  EXPECT_THAT(chart, HasSubstr("conv1/conv &lt;script&gt;"));
  EXPECT_THAT(chart, Not(HasSubstr("<script>")));
  // The top table, in measured order, with the bound of each.
  EXPECT_THAT(page, HasSubstr("<tr><td>1</td><td>conv1/conv &lt;script&gt;</td><td>20 ms</td>"
                              "<td>40.0 %</td>"));
  EXPECT_THAT(page, HasSubstr("<td>3</td><td>copy</td>"));
  EXPECT_THAT(page, HasSubstr("<th>efficiency (attainable / measured)</th><td>40.0 %</td>"));
}

TEST(ReportRender, RooflineMarksSitWhereTheirFiguresSay) {
  // On log axes a kernel at the ridge with the peak's GFLOP/s lies on the roof's corner.
  svg::Roof roof{100, 10};  // ridge at 10 FLOP/B
  std::string chart = svg::roofline_chart("roofline", "t", roof,
                                          {{"1", "at the ridge", "", "#000", 10, 100, false}});
  std::string path = attribute(chart, "<path class=\"roof\"", "d");
  std::string cx = attribute(chart, "<circle class=\"point\"", "cx");
  std::string cy = attribute(chart, "<circle class=\"point\"", "cy");
  ASSERT_FALSE(path.empty());
  ASSERT_FALSE(cx.empty());
  EXPECT_THAT(path, HasSubstr("L" + cx + " " + cy + "L")) << path << " vs " << cx << "," << cy;
}

TEST(ReportRender, RooflineWithoutPeaksOrDrawableKernelsSaysSo) {
  std::string chart =
      svg::roofline_chart("roofline", "t", svg::Roof{}, {{"1", "k", "", "#000", 2, 3, false}});
  EXPECT_EQ(count(chart, "<path class=\"roof\""), 0);
  EXPECT_THAT(chart, HasSubstr("no machine peaks recorded"));
  EXPECT_EQ(count(chart, "<circle class=\"point"), 1);
  std::string none = svg::roofline_chart(
      "roofline", "t", svg::Roof{100, 10},
      {{"1", "k", "", "#000", 0, 0, false}, {"2", "k", "", "#000", NAN, 1, false}});
  EXPECT_THAT(none, HasSubstr("no data: no kernel has both FLOPs and bytes"));
  EXPECT_THAT(svg::roofline_chart("roofline", "t", svg::Roof{100, 10}, {}), HasSubstr("no data"));
}

TEST(ReportRender, MemoryBreakdownStacksTheEstimateBesideThePeak) {
  std::string page = render_report({profiled_run()});
  std::string chart = plot(page, "memory");
  ASSERT_FALSE(chart.empty());
  // Seven parts (constants are 0 bytes: a 0.5 px sliver still marks them) and the peak.
  EXPECT_EQ(count(chart, "<rect class=\"bar\""), 8);
  EXPECT_THAT(chart, HasSubstr("<title>saved activations: 20 MB</title>"));
  EXPECT_THAT(chart, HasSubstr(">37.101 MB</text>"));  // the estimate's total
  EXPECT_THAT(chart, HasSubstr(">38 MB</text>"));      // the observed peak
  EXPECT_THAT(page, HasSubstr("<th>observed - estimate</th><td>0.899 MB</td>"));
  EXPECT_THAT(svg::stacked_bar_chart("memory", "t", "MB", {{"a", {{"x", NAN, "#000"}}}}),
              HasSubstr("no data"));
}

TEST(ReportRender, LongRunsAreThinnedToThePixelsKeepingSpikes) {
  RunData long_run = run("a", 0);
  for (int64_t step = 1; step <= 100000; ++step) long_run.metrics.push_back(train(step, 1.0));
  long_run.metrics[50000].values["loss"] = 8;  // one spike among 100 000 points
  std::string chart = plot(render_report({long_run}), "train_loss");
  EXPECT_LT(chart.size(), 60000u);  // not 100 000 points' worth
  svg::Layout layout;
  // The spike is the y axis's top tick (8): its point is on the top edge of the plot area.
  EXPECT_THAT(chart, HasSubstr(" " + svg::px(layout.top) + "L"));
}

TEST(ReportRender, SameRunsGiveTheSameBytes) {
  EXPECT_EQ(render_report({run("a"), run("b")}), render_report({run("a"), run("b")}));
  EXPECT_THROW(render_report({}), Error);
}

TEST(ReportScale, TicksAreRoundNumbers) {
  svg::Scale scale = svg::nice_scale(0.02, 0.93, 0, 100, true);
  EXPECT_DOUBLE_EQ(scale.lo, 0);
  EXPECT_DOUBLE_EQ(scale.hi, 1);
  EXPECT_EQ(scale.ticks.size(), 6u);
  EXPECT_EQ(svg::tick_label(scale.ticks[3], scale.step), "0.6");
  svg::Scale steps = svg::nice_scale(1, 2, 0, 100, false, 1);  // epochs 1 and 2
  EXPECT_EQ(steps.ticks, (std::vector<double>{1, 2}));
  svg::Scale flat = svg::nice_scale(5, 5, 0, 100, true);  // one value: widened around it
  EXPECT_LT(flat.lo, 5);
  EXPECT_GT(flat.hi, 5);
}

void write(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

constexpr const char* kRunJson = R"({"experiment": "mlp", "run_id": "r1", "status": "completed"})";

TEST(ReportLoad, ReadsARunDirectory) {
  ScratchDir dir;
  write(dir / "run.json", kRunJson);
  write(dir / "config.toml", "[train]\nepochs = 1\n");
  write(dir / "metrics.jsonl",
        "{\"kind\":\"train\",\"step\":1,\"epoch\":1,\"loss\":\"nan\",\"step_ms\":0.0}\n"
        "\n"
        "{\"kind\":\"eval\",\"step\":1,\"epoch\":1,\"test_accuracy\":0.5,\"test_loss\":\"inf\"}\n"
        "{\"kind\":\"train\",\"step\":2,\"ep");  // torn by a crash
  RunData data = load_run_data(dir.path());
  EXPECT_EQ(data.key(), "mlp/r1");
  EXPECT_EQ(data.config_toml, "[train]\nepochs = 1\n");
  ASSERT_EQ(data.metrics.size(), 2u);
  EXPECT_TRUE(std::isnan(data.metrics[0].values.at("loss")));
  EXPECT_EQ(data.metrics[1].kind, "eval");
  EXPECT_TRUE(std::isinf(data.metrics[1].values.at("test_loss")));
  EXPECT_TRUE(data.torn_last_line);
  EXPECT_THAT(render_report({data}), HasSubstr("the last line of metrics.jsonl is torn"));
}

TEST(ReportLoad, ARunWithoutMetricsOrConfigStillLoads) {
  ScratchDir dir;
  write(dir / "run.json", kRunJson);
  RunData data = load_run_data(dir.path());
  EXPECT_TRUE(data.metrics.empty());
  EXPECT_THAT(render_report({data}), HasSubstr("no config.toml"));
}

TEST(ReportLoad, ErrorsNameTheFileAndLine) {
  ScratchDir dir;
  EXPECT_TRUE(fails_with([&] { load_run_data(dir.path()); }, {"has no run.json", "HINT:"}));
  EXPECT_TRUE(fails_with([&] { load_run_data(dir / "missing"); }, {"no run directory at"}));
  write(dir / "run.json", "{\n  \"status\": \"completed\",\n  oops\n}\n");
  EXPECT_TRUE(fails_with([&] { load_run_data(dir.path()); },
                         {(dir / "run.json").string() + ":3: not valid JSON"}));
  write(dir / "run.json", "[1, 2]");
  EXPECT_TRUE(fails_with([&] { load_run_data(dir.path()); }, {"run.json:1: not a run record"}));
  write(dir / "run.json", kRunJson);
  std::string metrics = (dir / "metrics.jsonl").string();
  write(dir / "metrics.jsonl",
        "{\"kind\":\"train\",\"step\":1}\n{\"kind\":\"tr\n{\"kind\":\"train\",\"step\":3}\n");
  EXPECT_TRUE(fails_with([&] { load_run_data(dir.path()); },
                         {metrics + ":2: not a JSON record", "only the last line may be torn"}));
  write(dir / "metrics.jsonl", "{\"kind\":\"train\",\"step\":1}\n[1]\n");
  EXPECT_TRUE(
      fails_with([&] { load_run_data(dir.path()); }, {metrics + ":2: not a metrics record"}));
  write(dir / "metrics.jsonl", "{\"kind\":\"eval\",\"step\":\"one\"}\n");
  EXPECT_TRUE(fails_with([&] { load_run_data(dir.path()); },
                         {metrics + ":1: a \"eval\" record without an integer \"step\""}));
}

TEST(ReportWrite, WritesTheReportBesideTheRun) {
  ScratchDir dir;
  write(dir / "run.json", kRunJson);
  write(dir / "metrics.jsonl", "{\"kind\":\"train\",\"step\":2,\"loss\":1.0,\"step_ms\":3}\n");
  std::filesystem::path out = write_run_report(dir.path());
  EXPECT_EQ(out, dir / "report.html");
  std::ifstream in(out, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), render_report({load_run_data(dir.path())}));
  write_report(dir / "again.html", {load_run_data(dir.path())});
  EXPECT_EQ(dir.listing(),
            (std::vector<std::string>{"again.html", "metrics.jsonl", "report.html", "run.json"}));
}

}  // namespace
}  // namespace kiln::track
