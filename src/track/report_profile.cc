// The profile of one run in `kiln report`: run.json's "roofline" (measured per kernel
// against the machine's roofs) as a log-log chart and a table of the top kernels, and its
// "memory" (the planner's estimate by what the bytes hold, against the allocator's peak)
// as a stacked bar and a table. docs/profiling.md says how to read both.
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "track/report_html.h"
#include "track/report_sections.h"
#include "track/report_svg.h"

namespace kiln::track::report {
namespace {

using nlohmann::json;

std::string text(const json& object, const char* key) {
  auto found = object.find(key);
  return found != object.end() && found->is_string() ? found->get<std::string>() : "";
}

std::string bound_color(const std::string& bound) {
  if (bound == "compute") return "#1f6fb4";
  if (bound == "memory") return "#d9730d";
  return "#8a8f98";  // overhead: far below both roofs
}

std::string milliseconds(double seconds) {
  return html::number(seconds * 1e3) + " ms";
}

std::string percent(double share) {
  return std::isfinite(share) ? fmt::format("{:.1f} %", share * 100) : "nan";
}

const json& top_rows(const json& roofline) {
  static const json kNone = json::array();
  auto found = roofline.find("top");
  return found != roofline.end() && found->is_array() ? *found : kNone;
}

std::string roofline_chart(const json& roofline) {
  std::vector<svg::RooflineMark> marks;
  const json& top = top_rows(roofline);
  for (size_t i = 0; i < top.size(); ++i) {
    const json& row = top[i];
    if (!row.is_object()) continue;
    std::string bound = text(row, "bound");
    marks.push_back(
        {std::to_string(i + 1),
         fmt::format("{}. {}: {} per step ({} of the step), {} FLOP/B, {} GFLOP/s, {} bound", i + 1,
                     text(row, "name"), milliseconds(number_at(row, nullptr, "measured_seconds")),
                     percent(number_at(row, nullptr, "share_of_step")),
                     html::number(number_at(row, nullptr, "arithmetic_intensity")),
                     html::number(number_at(row, nullptr, "achieved_gflops")), bound),
         bound + " bound", bound_color(bound), number_at(row, nullptr, "arithmetic_intensity"),
         number_at(row, nullptr, "achieved_gflops"), false});
  }
  double step_s = number_at(roofline, nullptr, "step_seconds");
  double step_gflops = step_s > 0 ? number_at(roofline, nullptr, "flops") / step_s / 1e9 : NAN;
  marks.push_back(
      {"step",
       fmt::format("the whole train step: {} FLOP/B, {} GFLOP/s, efficiency {}",
                   html::number(number_at(roofline, nullptr, "arithmetic_intensity")),
                   html::number(step_gflops), percent(number_at(roofline, nullptr, "efficiency"))),
       "whole step", "#222", number_at(roofline, nullptr, "arithmetic_intensity"), step_gflops,
       true});
  svg::Roof roof{number_at(roofline, nullptr, "peak_gflops"),
                 number_at(roofline, nullptr, "bandwidth_gbs")};
  return svg::roofline_chart("roofline", "Roofline: the top kernels of a train step", roof, marks);
}

std::string roofline_table(const json& roofline) {
  html::Rows summary;
  auto add = [&](const char* label, std::string value) { summary.emplace_back(label, value); };
  add("train step (median)", milliseconds(number_at(roofline, nullptr, "step_seconds")));
  add("in kernels", milliseconds(number_at(roofline, nullptr, "kernel_seconds")));
  add("outside kernels", milliseconds(number_at(roofline, nullptr, "outside_kernels_seconds")));
  add("attainable (sum of the roofs)",
      milliseconds(number_at(roofline, nullptr, "attainable_seconds")));
  add("efficiency (attainable / measured)", percent(number_at(roofline, nullptr, "efficiency")));
  add("FLOPs per step", html::number(number_at(roofline, nullptr, "flops")));
  add("bytes per step", html::number(number_at(roofline, nullptr, "bytes")));
  add("peak GFLOP/s, GB/s",
      fmt::format("{}, {} ({})", html::number(number_at(roofline, nullptr, "peak_gflops")),
                  html::number(number_at(roofline, nullptr, "bandwidth_gbs")),
                  text(roofline, "peaks_measured_by")));
  add("steps profiled", html::cell_text(roofline.value("train_steps", json())));
  add("kernels", html::cell_text(roofline.value("kernels", json())));
  std::string out = html::key_value_table(summary);
  const json& top = top_rows(roofline);
  if (top.empty()) return out;
  out +=
      "<h4>Top kernels by measured time (per train step)</h4>\n<table class=\"grid\"><tr><th>#</th>"
      "<th>kernel</th><th>measured</th><th>share</th><th>attainable</th><th>FLOP/B</th>"
      "<th>GFLOP/s</th><th>GB/s</th><th>bound</th></tr>\n";
  for (size_t i = 0; i < top.size(); ++i) {
    const json& row = top[i];
    if (!row.is_object()) continue;
    out += fmt::format(
        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
        "<td>{}</td><td>{}</td></tr>\n",
        i + 1, html::escape(text(row, "name")),
        milliseconds(number_at(row, nullptr, "measured_seconds")),
        percent(number_at(row, nullptr, "share_of_step")),
        milliseconds(number_at(row, nullptr, "attainable_seconds")),
        html::number(number_at(row, nullptr, "arithmetic_intensity")),
        html::number(number_at(row, nullptr, "achieved_gflops")),
        html::number(number_at(row, nullptr, "achieved_gbs")), html::escape(text(row, "bound")));
  }
  return out + "</table>\n";
}

struct MemoryPart {
  const char* key;
  const char* label;
  const char* color;
};

constexpr MemoryPart kMemoryParts[] = {
    {"params", "parameters", "#1f6fb4"},
    {"optimizer_state", "optimizer state", "#6b9fd6"},
    {"other_inputs", "other inputs (batch, keys)", "#2e9d6a"},
    {"constants", "constants", "#9fcf9a"},
    {"outputs", "outputs", "#a05fb0"},
    {"saved_activations", "saved activations", "#d9730d"},
    {"temporaries", "temporaries", "#e8b23a"},
};

const json& estimate_of(const json& memory) {
  static const json kNone = json::object();
  auto found = memory.find("estimate");
  return found != memory.end() && found->is_object() ? *found : kNone;
}

constexpr double kMegabyte = 1e6;

std::string memory_chart(const json& memory) {
  const json& estimate = estimate_of(memory);
  svg::StackedBar planned{"planner estimate", {}};
  for (const MemoryPart& part : kMemoryParts) {
    planned.parts.push_back(
        {part.label, number_at(estimate, nullptr, part.key) / kMegabyte, part.color});
  }
  svg::StackedBar observed{
      "allocator peak",
      {{"observed", number_at(memory, nullptr, "observed_peak_bytes") / kMegabyte, "#444"}}};
  return svg::stacked_bar_chart("memory", "Memory of a train step: estimate and observed", "MB",
                                {planned, observed});
}

std::string memory_table(const json& memory) {
  const json& estimate = estimate_of(memory);
  html::Rows rows;
  auto megabytes = [](double bytes) { return html::number(bytes / kMegabyte) + " MB"; };
  for (const MemoryPart& part : kMemoryParts) {
    rows.emplace_back(part.label, megabytes(number_at(estimate, nullptr, part.key)));
  }
  rows.emplace_back("estimate, total", megabytes(number_at(estimate, nullptr, "total")));
  rows.emplace_back("allocator's observed peak",
                    megabytes(number_at(memory, nullptr, "observed_peak_bytes")));
  rows.emplace_back("observed - estimate",
                    megabytes(number_at(memory, nullptr, "observed_minus_estimate_bytes")));
  rows.emplace_back("planned arena", megabytes(number_at(memory, nullptr, "arena_bytes")));
  rows.emplace_back("arena's peak at step",
                    html::cell_text(memory.value("arena_peak_step", json())));
  return html::key_value_table(rows);
}

// The shapes profile::Roofline::to_json and profile::memory_report_json write; anything
// else (a run.json from another version) is shown as plain tables rather than as nans.
bool is_roofline(const json* roofline) {
  return roofline && roofline->is_object() && roofline->contains("top") &&
         (*roofline)["top"].is_array();
}

bool is_memory_report(const json* memory) {
  return memory && memory->is_object() && memory->contains("estimate") &&
         (*memory)["estimate"].is_object();
}

}  // namespace

std::string profile_charts(const nlohmann::json* roofline, const nlohmann::json* memory) {
  std::string out;
  if (is_roofline(roofline)) out += roofline_chart(*roofline);
  if (is_memory_report(memory)) out += memory_chart(*memory);
  return out;
}

std::string roofline_tables(const nlohmann::json& roofline) {
  return is_roofline(&roofline) ? roofline_table(roofline) : html::json_tables(roofline);
}

std::string memory_tables(const nlohmann::json& memory) {
  return is_memory_report(&memory) ? memory_table(memory) : html::json_tables(memory);
}

}  // namespace kiln::track::report
