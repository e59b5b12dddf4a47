// The page of `kiln report` (report.h): its style, the header with each run's outcome, the
// sections in reading order, and writing it.
#include "track/report.h"

#include <cmath>

#include <fmt/format.h>

#include "io/atomic_file.h"
#include "kiln/error.h"
#include "kiln/version.h"
#include "track/report_html.h"
#include "track/report_sections.h"
#include "track/report_svg.h"

namespace kiln::track {
namespace {

constexpr const char* kStyle = R"(
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1d2330;
  background:#f4f5f7;margin:0}
main{max-width:1240px;margin:0 auto;padding:20px}
header,section{background:#fff;border:1px solid #dde1e7;border-radius:6px;padding:14px 18px;
  margin-bottom:16px}
h1{font-size:21px;margin:0 0 6px}h2{font-size:17px;margin:0 0 8px}h3{font-size:14px;margin:12px 0 4px}
h4{font-size:13px;margin:8px 0 2px;color:#444}
.help{color:#4a5160;margin:0 0 10px;max-width:900px}.note{color:#7a5a00}
.charts{display:flex;flex-wrap:wrap;gap:12px 16px}
figure{margin:0 0 8px}figcaption{font-size:12px;color:#555;max-width:560px}
svg.chart{max-width:100%;height:auto}
svg text{font-family:inherit;font-size:11px;fill:#333}
svg .title{font-size:13px;font-weight:600}svg .label{font-size:12px}
svg .grid{stroke:#e7e9ed}svg .axis{stroke:#8a8f98}
svg .series{fill:none;stroke-width:1.6;stroke-linejoin:round;stroke-linecap:round}
svg .empty{font-size:14px;fill:#888}svg .value{font-size:11px}svg .mark-label{font-size:10px;fill:#555}
.tables{display:grid;grid-template-columns:repeat(auto-fill,minmax(440px,1fr));gap:4px 22px}
table{border-collapse:collapse;font-size:12.5px;width:100%}
th,td{border-bottom:1px solid #eceef1;padding:3px 6px;text-align:left;vertical-align:top}
td{white-space:pre-line;overflow-wrap:anywhere;font-family:ui-monospace,Menlo,Consolas,monospace}
table.kv th{width:40%;font-weight:500;color:#3d4350}
table.grid th{font-weight:500;color:#3d4350;background:#f7f8fa}
details{margin-top:12px}summary{font-weight:600;cursor:pointer}
pre.config{background:#f4f5f7;border:1px solid #e2e5ea;padding:10px;overflow:auto;max-height:640px;
  font-size:12px;line-height:1.35}
.badge{display:inline-block;padding:1px 8px;border-radius:9px;font-weight:600;font-size:12px;
  background:#e8eaee;color:#333}
.status-completed{background:#dcf2e2;color:#17652f}.status-failed,.status-crashed{background:#fbe0e0;
  color:#9b1c1c}.status-interrupted{background:#fdf0d5;color:#8a5300}.status-running{background:#dde9fb;
  color:#1d4f99}
.finals{display:flex;gap:28px;margin-top:8px}.final b{display:block;font-size:24px}
.final span{color:#555;font-size:12px}
.swatch{display:inline-block;width:12px;height:12px;border-radius:2px;margin-right:6px}
.error{color:#9b1c1c;white-space:pre-wrap}
footer{color:#777;font-size:12px;text-align:center;margin-bottom:16px}
)";

// run.json's final results, else (a run still going, or one that crashed) the last
// evaluation in metrics.jsonl.
double final_value(const RunData& run, const std::string& key) {
  if (const std::optional<FinalMetrics>& final_metrics = run.info.final_metrics) {
    double value = key == "test_accuracy" ? final_metrics->test_accuracy
                   : key == "test_loss"   ? final_metrics->test_loss
                                          : NAN;
    if (!std::isnan(value)) return value;
  }
  for (auto record = run.metrics.rbegin(); record != run.metrics.rend(); ++record) {
    auto found = record->values.find(key);
    if (record->kind == "eval" && found != record->values.end()) return found->second;
  }
  return NAN;
}

std::string percent(double fraction) {
  return std::isfinite(fraction) ? fmt::format("{:.2f} %", 100 * fraction) : html::number(fraction);
}

std::string duration(const RunInfo& info) {
  if (!info.seconds) return "";
  double s = *info.seconds;
  if (s < 60) return fmt::format("{:.1f} s", s);
  auto whole = static_cast<int64_t>(std::llround(s));
  if (whole < 3600) return fmt::format("{} min {:02} s", whole / 60, whole % 60);
  return fmt::format("{} h {:02} min", whole / 3600, whole / 60 % 60);
}

std::string steps_text(const RunInfo& info) {
  return info.steps ? std::to_string(*info.steps) : std::string();
}

// A status as a CSS class name: only the statuses kiln writes get their colors.
std::string badge(const std::string& status) {
  std::string css = "other";
  for (const char* known : {"completed", "failed", "crashed", "interrupted", "running"}) {
    if (status == known) css = known;
  }
  return fmt::format("<span class=\"badge status-{}\">{}</span>", css,
                     html::escape(status.empty() ? "unknown" : status));
}

std::string when(const RunInfo& info) {
  std::string out = "started " + html::escape(info.started_at);
  const std::string& finished = info.finished_at;
  if (!finished.empty()) out += " &middot; finished " + html::escape(finished);
  std::string took = duration(info);
  if (!took.empty()) out += " &middot; " + html::escape(took);
  std::string steps = steps_text(info);
  if (!steps.empty()) out += " &middot; " + html::escape(steps) + " steps";
  return out;
}

std::string one_run_header(const RunData& run) {
  std::string out = fmt::format("<h1>kiln report: {}</h1>\n<p>{} {}</p>\n", html::escape(run.key()),
                                badge(run.info.status), when(run.info));
  const std::string& error = run.info.error;
  if (!error.empty()) out += "<p class=\"error\">" + html::escape(error) + "</p>\n";
  out += fmt::format(
      "<div class=\"finals\"><div class=\"final\"><b>{}</b><span>final test accuracy</span></div>"
      "<div class=\"final\"><b>{}</b><span>final test loss</span></div></div>\n",
      html::escape(percent(final_value(run, "test_accuracy"))),
      html::escape(html::number(final_value(run, "test_loss"))));
  return out;
}

std::string several_runs_header(const std::vector<RunData>& runs) {
  std::string out =
      fmt::format("<h1>kiln report: {} runs</h1>\n<table class=\"grid\">\n", runs.size());
  out +=
      "<tr><th>run</th><th>status</th><th>started</th><th>finished</th><th>time</th>"
      "<th>steps</th><th>test accuracy</th><th>test loss</th></tr>\n";
  std::vector<svg::Bar> bars;
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunData& run = runs[i];
    double accuracy = final_value(run, "test_accuracy");
    out += fmt::format(
        "<tr><td><span class=\"swatch\" style=\"background:{}\"></span>{}</td><td>{}</td>"
        "<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
        html::escape(report::run_color(i)), html::escape(run.key()), badge(run.info.status),
        html::escape(run.info.started_at), html::escape(run.info.finished_at),
        html::escape(duration(run.info)), html::escape(steps_text(run.info)),
        html::escape(percent(accuracy)), html::escape(html::number(final_value(run, "test_loss"))));
    bars.push_back({run.key(), 100 * accuracy, report::run_color(i)});
  }
  out += "</table>\n";
  return out + svg::bar_chart("final_accuracy", "Final test accuracy", "%", bars);
}

}  // namespace

std::string render_report(const std::vector<RunData>& runs) {
  if (runs.empty()) fail(kUnknownSite, "a report needs at least one run");
  std::string title = runs.size() == 1 ? runs[0].key() : fmt::format("{} runs", runs.size());
  std::string out = fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
      "<title>kiln report: {}</title>\n<style>{}</style>\n</head>\n<body>\n<main>\n<header>\n",
      html::escape(title), kStyle);
  out += runs.size() == 1 ? one_run_header(runs[0]) : several_runs_header(runs);
  out += "</header>\n";
  out += report::curves_section(runs);
  out += report::telemetry_section(runs);
  out += report::step_time_section(runs);
  for (size_t i = 0; i < runs.size(); ++i) out += report::run_section(runs[i], i, runs.size() > 1);
  out += fmt::format(
      "</main>\n<footer>made by kiln {} from run.json, config.toml and metrics.jsonl</footer>\n"
      "</body>\n</html>\n",
      html::escape(kVersion));
  return out;
}

void check_report_destination(const std::filesystem::path& out) {
  namespace fs = std::filesystem;
  std::error_code error;
  fs::file_status status = fs::symlink_status(out, error);
  if (!fs::exists(status)) return;  // a new file
  std::string_view kind = fs::is_directory(status) ? "a directory"
                          : fs::is_symlink(status) ? "a symbolic link"
                          : fs::is_fifo(status)    ? "a FIFO"
                          : fs::is_character_file(status) || fs::is_block_file(status) ? "a device"
                          : !fs::is_regular_file(status) ? "not a regular file"
                          : out.extension() != ".html"   ? "a file that is not an HTML report"
                                                         : "";
  if (kind.empty()) return;
  fail(kUnknownSite,
       fmt::format("will not write the report to {}: it is {}, which the report would replace",
                   out.string(), kind),
       "-o names a new file, or an existing .html file to replace (a run's records, devices and "
       "links are never replaced)");
}

void write_report(const std::filesystem::path& out, const std::vector<RunData>& runs) {
  check_report_destination(out);
  io::write_file_atomically(out, std::string_view(render_report(runs)));
}

std::filesystem::path write_run_report(const std::filesystem::path& run_dir) {
  std::filesystem::path out = run_dir / "report.html";
  write_report(out, {load_run_data(run_dir)});
  return out;
}

}  // namespace kiln::track
