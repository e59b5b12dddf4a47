// One run's tables in `kiln report`: run.json grouped by what it tells (the run, its time,
// identity, environment, data, compilation, savepoints, the privacy spent, the optional
// timing / roofline / memory objects), whatever else it holds, and config.toml.
#include <cmath>
#include <initializer_list>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "io/bounded_read.h"
#include "track/report_html.h"
#include "track/report_sections.h"
#include "track/report_svg.h"

namespace kiln::track::report {
namespace {

using nlohmann::json;

// Hands out run.json's top-level keys to the tables, remembering which were shown so that
// the rest can be listed at the end: a field added to run.json later still appears.
class Picker {
 public:
  explicit Picker(const json& info) : info_(info) {}

  const json* take(const std::string& key) {
    auto found = info_.find(key);
    if (found == info_.end()) return nullptr;
    used_.insert(key);
    return &*found;
  }

  html::Rows rows(std::initializer_list<const char*> keys) {
    html::Rows rows;
    for (const char* key : keys) {
      const json* value = take(key);
      if (value == nullptr) continue;
      html::Rows part = value->is_object() ? html::flatten(*value, key)
                                           : html::Rows{{key, html::cell_text(*value)}};
      rows.insert(rows.end(), part.begin(), part.end());
    }
    return rows;
  }

  // The keys' rows, less those whose value `object` (a part already shown) repeats.
  html::Rows rows_not_in(std::initializer_list<const char*> keys, const char* object) {
    auto found = info_.find(object);
    html::Rows rows;
    for (const char* key : keys) {
      const json* value = take(key);
      if (value == nullptr) continue;
      if (found != info_.end() && found->is_object() && found->contains(key) &&
          (*found)[key] == *value) {
        continue;
      }
      rows.emplace_back(key, html::cell_text(*value));
    }
    return rows;
  }

  json rest() const {
    json rest = json::object();
    for (const auto& [key, value] : info_.items()) {
      if (!used_.count(key)) rest[key] = value;
    }
    return rest;
  }

 private:
  const json& info_;
  std::set<std::string> used_;
};

// What the run's seconds went to, as far as run.json tells (the parts overlap: the first
// step includes its compilation).
std::string time_chart(const json& info, const std::string& color) {
  struct Part {
    const char* label;
    const char* object;
    const char* key;
  };
  static constexpr Part kParts[] = {
      {"whole run", nullptr, "seconds"},
      {"process start to first step", nullptr, "first_step_seconds"},
      {"jit compilation", "jit", "compile_seconds"},
      {"waiting for data", "data_wait", "total_seconds"},
      {"savepoints (training thread)", "savepoints", "training_thread_seconds"},
  };
  std::vector<svg::Bar> bars;
  for (const Part& part : kParts) {
    double seconds = number_at(info, part.object, part.key);
    if (!std::isnan(seconds)) bars.push_back({part.label, seconds, color});
  }
  if (bars.empty()) return {};
  return svg::bar_chart("time_breakdown", "Where the time went", "s", bars);
}

std::string table(const std::string& title, const std::string& body) {
  return fmt::format("<div class=\"table\">\n<h3>{}</h3>\n{}</div>\n", html::escape(title), body);
}

// Each resume's environment is a table of its own size; the resume table keeps the rest.
json without_environments(const json& resumes) {
  json out = resumes;
  if (!out.is_array()) return out;
  for (json& resume : out) {
    if (resume.is_object()) resume.erase("environment");
  }
  return out;
}

std::string optional_sections(Picker& picker, const json* roofline, const json* memory) {
  std::string out;
  if (const json* timing = picker.take("timing"))
    out += table("Timing", html::json_tables(*timing));
  if (roofline) out += table("Roofline", roofline_tables(*roofline));
  if (memory) out += table("Memory", memory_tables(*memory));
  return out;
}

std::string config_block(const RunData& run) {
  if (run.config_toml.empty()) return "<h3>Config</h3>\n<p class=\"note\">no config.toml</p>\n";
  return "<details open>\n<summary>Config (config.toml, resolved: every key)</summary>\n"
         "<pre class=\"config\">" +
         html::escape(run.config_toml) + "</pre>\n</details>\n";
}

}  // namespace

double number_at(const json& info, const char* object, const char* key) {
  const json* value = &info;
  if (object) {
    auto found = info.find(object);
    if (found == info.end() || !found->is_object()) return NAN;
    value = &*found;
  }
  auto found = value->find(key);
  return found != value->end() && found->is_number() ? found->get<double>() : NAN;
}

std::string run_section(const RunData& run, size_t index, bool several) {
  // The tables show run.json as a document, every key of it, typed or not.
  json document = io::parse_json(run_info_text(run.info, -1), "run.json");
  Picker picker(document);
  std::string out = fmt::format("<section class=\"run\" id=\"run-{}\">\n<h2>", index + 1);
  if (several) {
    out += fmt::format("<span class=\"swatch\" style=\"background:{}\"></span>",
                       html::escape(run_color(index)));
  }
  out += html::escape(run.key()) + "</h2>\n";
  const json* roofline = picker.take("roofline");
  const json* memory = picker.take("memory");
  std::string charts = time_chart(document, run_color(index)) + profile_charts(roofline, memory);
  if (!charts.empty()) out += "<div class=\"charts\">\n" + charts + "</div>\n";
  out += "<div class=\"tables\">\n";
  out += table("Run", html::key_value_table(picker.rows(
                          {"status", "started_at", "finished_at", "seconds", "steps", "total_steps",
                           "skipped_steps", "parameters", "median_step_ms", "first_step_seconds",
                           "final", "error", "signal", "crash_detected_at", "config_file",
                           "params_file", "params_sha256", "state_file"})));
  html::Rows identity = picker.rows({"experiment", "run_id", "identity", "seed", "host"});
  html::Rows repeated =
      picker.rows_not_in({"config_sha256", "kernels", "kiln_version"}, "identity");
  identity.insert(identity.end(), repeated.begin(), repeated.end());
  out += table("Identity", html::key_value_table(identity));
  html::Rows environment = picker.rows({"environment"});
  repeated = picker.rows_not_in({"compute_threads"}, "environment");
  environment.insert(environment.end(), repeated.begin(), repeated.end());
  out += table("Environment", html::key_value_table(environment));
  out += table("Compilation (jit)", html::key_value_table(picker.rows({"jit"})));
  out += table("Data loading", html::key_value_table(picker.rows({"data_wait"})));
  if (const json* dataset = picker.take("dataset"))
    out += table("Dataset", html::json_tables(*dataset));
  out += table("Savepoints", html::key_value_table(picker.rows({"savepoints", "last_savepoint",
                                                                "last_good", "savepoint_errors"})));
  if (const json* resumes = picker.take("resumes")) {
    out += table("Resumes", html::json_tables(without_environments(*resumes)));
  }
  if (document.contains("privacy")) {
    out += table("Privacy (DP-SGD)", html::key_value_table(picker.rows({"privacy"})));
  }
  if (const json* problems = picker.take("tracking_problems")) {
    out += table("Tracking problems",
                 html::key_value_table({{"problems", html::cell_text(*problems)}}));
  }
  out += optional_sections(picker, roofline, memory);
  json rest = picker.rest();
  if (!rest.empty()) out += table("Other fields of run.json", html::json_tables(rest));
  out += "</div>\n" + config_block(run);
  return out + "</section>\n";
}

}  // namespace kiln::track::report
