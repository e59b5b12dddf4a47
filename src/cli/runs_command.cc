// `kiln runs`: the run catalog (docs/tracking.md). `list` shows the runs (filtered),
// `show RUN` one run's identity, config, lineage, artifacts and metrics, `compare A B` the
// differences between two runs (config, identity, environment) and their metrics at the
// final and the best step, `reindex` rebuilds the catalog from the run directories, `push`
// sends a run to an MLflow server.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/output.h"
#include "io/atomic_file.h"
#include "io/bounded_read.h"
#include "io/json_fields.h"
#include "io/json_text.h"
#include "kiln/error.h"
#include "track/catalog.h"
#include "train/progress.h"
#include "train/run_record.h"
#include "train/run_tracking.h"

namespace kiln::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct RunsOptions {
  std::string runs_dir = "runs";
  std::vector<std::string> filters;
  std::vector<std::string> runs;  // show: one; compare: two
  bool json = false;
  std::string mlflow_uri;         // push
  std::string mlflow_experiment;  // push
  int wait_seconds = 60;          // push
};

// The catalog of an existing runs directory; an error (with what to do) when there is none,
// rather than an empty catalog created by a mistyped --runs-dir.
track::Catalog open_catalog(const RunsOptions& options) {
  fs::path path = track::Catalog::path_in(options.runs_dir);
  if (!fs::exists(path)) {
    fail(kUnknownSite, fmt::format("no run catalog at {}", path.string()),
         fs::exists(options.runs_dir)
             ? "`kiln runs reindex` builds it from the run directories there"
             : "pass --runs-dir, the experiment.runs_dir your runs were written to");
  }
  return track::Catalog(path);
}

// Higher is better for accuracies, lower for losses; other metrics have no best.
std::optional<bool> higher_is_better(const std::string& key) {
  if (key.find("accuracy") != std::string::npos) return true;
  if (key.find("loss") != std::string::npos) return false;
  return std::nullopt;
}

struct MetricSummary {
  int64_t points = 0;
  track::MetricPoint last;
  std::optional<track::MetricPoint> best;
};

std::map<std::string, MetricSummary> summarize(const std::vector<track::MetricPoint>& points) {
  std::map<std::string, MetricSummary> summaries;
  for (const track::MetricPoint& point : points) {
    MetricSummary& summary = summaries[point.key];
    ++summary.points;
    summary.last = point;  // points come in step order
    std::optional<bool> higher = higher_is_better(point.key);
    if (!higher || std::isnan(point.value)) continue;
    if (!summary.best ||
        (*higher ? point.value > summary.best->value : point.value < summary.best->value)) {
      summary.best = point;
    }
  }
  return summaries;
}

std::string number(double value) {
  return fmt::format("{:.6g}", value);
}

// run.json's environment section (track/run_environment.h), or {} when there is none.
json environment_of(const track::RunInfo& info) {
  std::optional<json> environment = io::parse_json_if_valid(info.section("environment"));
  return environment && environment->is_object() ? *environment : json::object();
}

json point_json(const track::MetricPoint& point) {
  return {{"step", point.step},
          {"value", std::isfinite(point.value) ? json(point.value) : json(number(point.value))}};
}

json summary_json(const MetricSummary& summary) {
  json out = {{"points", summary.points}, {"final", point_json(summary.last)}};
  if (summary.best) out["best"] = point_json(*summary.best);
  return out;
}

std::string metric_or_dash(const std::map<std::string, MetricSummary>& metrics,
                           const std::string& key, double scale = 1) {
  auto found = metrics.find(key);
  return found == metrics.end() ? "-" : fmt::format("{:.4g}", scale * found->second.last.value);
}

int list_runs(const RunsOptions& options) {
  track::Catalog catalog = open_catalog(options);
  std::vector<track::RunFilter> filters;
  for (const std::string& text : options.filters) filters.push_back(track::RunFilter::parse(text));
  std::vector<track::RunRow> rows = catalog.list(filters);
  if (options.json) {
    json out = json::array();
    for (const track::RunRow& row : rows) {
      json metrics = json::object();
      for (const auto& [key, summary] : summarize(catalog.metrics(row.key))) {
        metrics[key] = summary_json(summary);
      }
      out.push_back({{"run", row.key},
                     {"experiment", row.experiment},
                     {"run_id", row.run_id},
                     {"run_dir", row.run_dir},
                     {"status", row.status},
                     {"started_at", row.started_at},
                     {"finished_at", row.finished_at},
                     {"steps", row.info.steps.value_or(0)},
                     {"metrics", metrics}});
    }
    print_result(io::json_text(out, 2) + "\n");
    return 0;
  }
  std::string text = fmt::format("{:<52} {:<11} {:<20} {:>7} {:>9} {:>9}\n", "run", "status",
                                 "started", "steps", "test acc", "test loss");
  for (const track::RunRow& row : rows) {
    auto metrics = summarize(catalog.metrics(row.key));
    text +=
        fmt::format("{:<52} {:<11} {:<20} {:>7} {:>9} {:>9}\n", row.key, row.status, row.started_at,
                    row.info.steps.value_or(0), metric_or_dash(metrics, "eval/test_accuracy"),
                    metric_or_dash(metrics, "eval/test_loss"));
  }
  text += fmt::format("{} run{}\n", rows.size(), rows.size() == 1 ? "" : "s");
  print_result(text);
  return 0;
}

json run_json(track::Catalog& catalog, const track::RunRow& row) {
  json metrics = json::object();
  for (const auto& [key, summary] : summarize(catalog.metrics(row.key))) {
    metrics[key] = summary_json(summary);
  }
  json lineage = json::array();
  for (const track::LineageEdge& edge : catalog.lineage(row.key)) {
    lineage.push_back({{"relation", edge.relation}, {"target", edge.target}});
  }
  json artifacts = json::array();
  for (const track::ArtifactEntry& artifact : catalog.artifacts(row.key)) {
    artifacts.push_back({{"name", artifact.name},
                         {"path", artifact.path},
                         {"sha256", artifact.sha256},
                         {"bytes", artifact.bytes}});
  }
  return {{"run", row.key},
          {"run_dir", row.run_dir},
          {"status", row.status},
          {"started_at", row.started_at},
          {"finished_at", row.finished_at},
          {"tags", catalog.tags(row.key)},
          {"params", catalog.params(row.key)},
          {"environment", environment_of(row.info)},
          {"lineage", lineage},
          {"artifacts", artifacts},
          {"metrics", metrics}};
}

int show_run(const RunsOptions& options) {
  track::Catalog catalog = open_catalog(options);
  track::RunRow row = catalog.find(options.runs.at(0));
  json run = run_json(catalog, row);
  if (options.json) {
    print_result(io::json_text(run, 2) + "\n");
    return 0;
  }
  std::string text = fmt::format("run {}\n  directory {}\n  status {} (started {}{})\n", row.key,
                                 row.run_dir, row.status, row.started_at,
                                 row.finished_at.empty() ? "" : ", finished " + row.finished_at);
  text += "identity\n";
  for (const auto& [key, value] : run["tags"].items()) {
    text += fmt::format("  {:<15} {}\n", key, value.get<std::string>());
  }
  for (const auto& edge : run["lineage"]) {
    text += fmt::format("  {:<15} {}\n", edge["relation"].get<std::string>(),
                        edge["target"].get<std::string>());
  }
  for (const auto& artifact : run["artifacts"]) {
    text += fmt::format("artifact {}: {} ({} bytes, sha256 {})\n",
                        artifact["name"].get<std::string>(), artifact["path"].get<std::string>(),
                        artifact["bytes"].get<int64_t>(), artifact["sha256"].get<std::string>());
  }
  text += fmt::format("metrics{:<22} {:>10} {:>8}  {:>10} {:>8}\n", "", "final", "step", "best",
                      "step");
  for (const auto& [key, summary] : summarize(catalog.metrics(row.key))) {
    text += fmt::format("  {:<27} {:>10} {:>8}  {:>10} {:>8}\n", key, number(summary.last.value),
                        summary.last.step, summary.best ? number(summary.best->value) : "",
                        summary.best ? std::to_string(summary.best->step) : "");
  }
  text += fmt::format("config ({} keys): kiln runs show {} --json, or {}/config.toml\n",
                      run["params"].size(), row.key, row.run_dir);
  print_result(text);
  return 0;
}

// "key.sub" -> value text of a JSON object, nested objects flattened, so that two
// environments compare key by key.
void flatten(const json& value, const std::string& prefix,
             std::map<std::string, std::string>& out) {
  if (value.is_object()) {
    for (const auto& [key, item] : value.items()) {
      flatten(item, prefix.empty() ? key : prefix + "." + key, out);
    }
  } else {
    out[prefix] = value.is_string() ? value.get<std::string>() : value.dump();
  }
}

// The keys whose values differ between `a` and `b` (a key one side lacks shows "(none)").
json differences(const std::map<std::string, std::string>& a,
                 const std::map<std::string, std::string>& b) {
  std::set<std::string> keys;
  for (const auto& [key, value] : a) keys.insert(key);
  for (const auto& [key, value] : b) keys.insert(key);
  json out = json::array();
  for (const std::string& key : keys) {
    auto in_a = a.find(key);
    auto in_b = b.find(key);
    std::string left = in_a == a.end() ? "(none)" : in_a->second;
    std::string right = in_b == b.end() ? "(none)" : in_b->second;
    if (left != right) out.push_back({{"key", key}, {"a", left}, {"b", right}});
  }
  return out;
}

int compare_runs(const RunsOptions& options) {
  track::Catalog catalog = open_catalog(options);
  track::RunRow a = catalog.find(options.runs.at(0));
  track::RunRow b = catalog.find(options.runs.at(1));
  std::map<std::string, std::string> env_a;
  std::map<std::string, std::string> env_b;
  flatten(environment_of(a.info), "", env_a);
  flatten(environment_of(b.info), "", env_b);
  auto metrics_a = summarize(catalog.metrics(a.key));
  auto metrics_b = summarize(catalog.metrics(b.key));
  json metrics = json::object();
  for (const auto& [key, summary] : metrics_a) {
    auto other = metrics_b.find(key);
    if (other == metrics_b.end()) continue;
    metrics[key] = {{"a", summary_json(summary)}, {"b", summary_json(other->second)}};
  }
  json out = {{"a", a.key},
              {"b", b.key},
              {"config", differences(catalog.params(a.key), catalog.params(b.key))},
              {"identity", differences(catalog.tags(a.key), catalog.tags(b.key))},
              {"environment", differences(env_a, env_b)},
              {"metrics", metrics}};
  if (options.json) {
    print_result(io::json_text(out, 2) + "\n");
    return 0;
  }
  std::string text = fmt::format("A {}\nB {}\n", a.key, b.key);
  for (const char* part : {"config", "identity", "environment"}) {
    text += fmt::format("{} differences: {}\n", part, out[part].size());
    for (const auto& row : out[part]) {
      text += fmt::format("  {:<32} A {}  B {}\n", row["key"].get<std::string>(),
                          row["a"].get<std::string>(), row["b"].get<std::string>());
    }
  }
  text += fmt::format("metrics{:<26} {:>10} {:>10}  {:>16} {:>16}\n", "", "final A", "final B",
                      "best A (step)", "best B (step)");
  for (const auto& [key, summary] : metrics_a) {
    auto other = metrics_b.find(key);
    if (other == metrics_b.end()) continue;
    auto best = [](const MetricSummary& s) {
      return s.best ? fmt::format("{} ({})", number(s.best->value), s.best->step) : std::string();
    };
    text += fmt::format("  {:<31} {:>10} {:>10}  {:>16} {:>16}\n", key, number(summary.last.value),
                        number(other->second.last.value), best(summary), best(other->second));
  }
  print_result(text);
  return 0;
}

int reindex(const RunsOptions& options) {
  if (!fs::is_directory(options.runs_dir)) {
    fail(kUnknownSite, fmt::format("no runs directory {}", options.runs_dir),
         "pass --runs-dir, the experiment.runs_dir your runs were written to");
  }
  track::Catalog catalog(track::Catalog::path_in(options.runs_dir));
  train::ReindexReport report = train::reindex_runs(options.runs_dir, catalog);
  std::string text =
      fmt::format("recorded {} run{} ({} metric points) in {}\n", report.runs,
                  report.runs == 1 ? "" : "s", report.metric_points, catalog.path().string());
  for (const std::string& problem : report.problems) text += "not recorded: " + problem + "\n";
  print_result(text);
  return report.problems.empty() ? 0 : 1;
}

// The run directory `spec` names: a directory holding run.json, else a run in the catalog.
fs::path run_directory(const RunsOptions& options, const std::string& spec) {
  if (fs::exists(fs::path(spec) / "run.json")) return spec;
  return open_catalog(options).find(spec).run_dir;
}

int push(const RunsOptions& options) {
  fs::path run_dir = run_directory(options, options.runs.at(0));
  track::RunInfo info = track::read_run_info(run_dir);
  std::string uri = options.mlflow_uri;
  if (uri.empty() && info.mlflow) uri = info.mlflow->uri;
  if (uri.empty()) {
    fail(kUnknownSite,
         fmt::format("{} was not mirrored to MLflow: which server?", run_dir.string()),
         "pass --mlflow-uri http://host:port");
  }
  track::MlflowReport report = train::push_run_to_mlflow(
      run_dir, uri, options.mlflow_experiment, std::chrono::seconds(options.wait_seconds));
  std::string text = fmt::format("MLflow {}: run {} in experiment {}: sent {}\n", uri,
                                 report.run_id.empty() ? "(none)" : report.run_id,
                                 report.experiment_id.empty() ? "(none)" : report.experiment_id,
                                 report.sent.describe());
  for (const std::string& problem : report.problems) text += "problem: " + problem + "\n";
  if (report.complete) {
    // run.json says where the run is now complete, so that another push completes the same
    // MLflow run.
    info.mlflow = track::MlflowMirrorRecord{uri, report.experiment_id, report.run_id, true};
    io::write_file_atomically(run_dir / "run.json", track::run_info_text(info) + "\n");
  }
  print_result(text);
  return report.complete ? 0 : 1;
}

}  // namespace

Runner add_runs_command(CLI::App& app) {
  auto options = std::make_shared<RunsOptions>();
  CLI::App* runs = app.add_subcommand(
      "runs", "List, show and compare runs recorded in the run catalog <runs-dir>/kiln.db");
  runs->require_subcommand(1);
  runs->add_option("--runs-dir", options->runs_dir,
                   "the runs directory (experiment.runs_dir of the configs)")
      ->capture_default_str();
  CLI::App* list = runs->add_subcommand("list", "One line per run, oldest first");
  list->add_option("--filter", options->filters,
                   "FIELD OP VALUE, OP one of = != < <= > >=; FIELD: experiment, status, run_id, "
                   "started_at, param.<config key>, tag.<name>, metric.<key> (its last value). "
                   "Repeatable: all must hold. E.g. --filter status=completed --filter "
                   "'metric.eval/test_accuracy>0.85'");
  CLI::App* show = runs->add_subcommand(
      "show", "A run's identity, lineage, artifacts, and each metric's final and best value");
  show->add_option("run", options->runs,
                   "the run: <experiment>/<run id>, its run id, a unique prefix, or its directory")
      ->required()
      ->expected(1);
  CLI::App* compare = runs->add_subcommand(
      "compare",
      "What differs between two runs (config keys, identity, environment) and their metrics "
      "at the final and the best step");
  compare->add_option("runs", options->runs, "the two runs (named as for show)")
      ->required()
      ->expected(2);
  CLI::App* reindex_command = runs->add_subcommand(
      "reindex", "Rebuild the catalog from the run directories (after it was lost or damaged)");
  CLI::App* push_command = runs->add_subcommand(
      "push", "Send a run (finished or not) to an MLflow tracking server, as the mirror does");
  push_command->add_option("run", options->runs, "the run directory, or a run named as for show")
      ->required()
      ->expected(1);
  push_command->add_option("--mlflow-uri", options->mlflow_uri,
                           "the server (default: the one run.json says the run was mirrored to)");
  push_command->add_option("--mlflow-experiment", options->mlflow_experiment,
                           "the MLflow experiment (default: the run's experiment name)");
  push_command->add_option("--wait", options->wait_seconds, "give up after this many seconds")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  for (CLI::App* command : {list, show, compare}) {
    command->add_flag("--json", options->json, "print JSON instead of a table");
  }
  return [options, list, show, compare, reindex_command, push_command] {
    if (*push_command) return push(*options);
    if (*list) return list_runs(*options);
    if (*show) return show_run(*options);
    if (*compare) return compare_runs(*options);
    if (*reindex_command) return reindex(*options);
    return 1;
  };
}

}  // namespace kiln::cli
