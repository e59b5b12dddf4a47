// `kiln bench cost`: what it costs to reach a quality, not to run a step. Each variant of
// the config trains (epoch by epoch, evaluating after each) until the target is reached or
// --max-epochs pass; the table gives the wall time of the whole run (data, compilation and
// evaluations included: what reaching the target costs), the examples and the training
// FLOPs spent (the roofline's per-step count, from the cost rules, times the steps), and
// the cost per example. Variants differ in one key (--compare), so f32 / bf16, or two
// optimizers, or two batch sizes sit side by side.
#include "cli/bench_cost.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/byte_size.h"
#include "kiln/error.h"
#include "track/run_info.h"
#include "train/config.h"
#include "train/progress.h"
#include "train/trainer.h"

namespace kiln::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct CostRow {
  std::string variant;  // "model.compute_dtype=bf16", or "" for the config as it is
  bool reached = false;
  int64_t epochs = 0;
  int64_t steps = 0;
  int64_t examples = 0;
  double seconds = 0;
  double flops = -1;        // -1: the run has no roofline to count them from
  int64_t peak_bytes = -1;  // the allocator's peak over the profiled steps; -1: not profiled
  double test_accuracy = 0;
  double test_loss = 0;
  fs::path run_dir;
};

train::QualityTarget parse_target(const std::string& text) {
  size_t equals = text.find('=');
  std::string metric = text.substr(0, equals);
  if (equals == std::string::npos || (metric != "test_accuracy" && metric != "test_loss")) {
    fail(kUnknownSite, fmt::format("--target '{}': expected METRIC=VALUE", text),
         "METRIC is test_accuracy (reached when at least VALUE, a fraction: 0.88) or test_loss "
         "(reached when at most VALUE)");
  }
  double value = 0;
  try {
    size_t used = 0;
    value = std::stod(text.substr(equals + 1), &used);
    if (used != text.size() - equals - 1) throw std::invalid_argument("trailing text");
  } catch (const std::exception&) {
    fail(CallSite(),
         fmt::format("--target '{}': '{}' is not a number", text, text.substr(equals + 1)));
  }
  if (metric == "test_accuracy" && !(value > 0 && value <= 1)) {
    fail(kUnknownSite, fmt::format("--target '{}': an accuracy is a fraction in (0, 1]", text),
         value > 1 && value <= 100 ? fmt::format("for {}%, write {}", value, value / 100) : "");
  }
  if (metric == "test_loss" && !(value > 0)) {
    fail(kUnknownSite, fmt::format("--target '{}': a loss target must be positive", text));
  }
  return train::QualityTarget{metric, value};
}

// "model.compute_dtype=f32,bf16" -> {"model.compute_dtype=f32", "model.compute_dtype=bf16"}.
std::vector<std::string> variants_of(const std::string& compare) {
  if (compare.empty()) return {""};
  size_t equals = compare.find('=');
  if (equals == std::string::npos || equals == 0 || equals + 1 == compare.size()) {
    fail(kUnknownSite, fmt::format("--compare '{}': expected KEY=VALUE,VALUE,...", compare),
         "e.g. --compare model.compute_dtype=f32,bf16");
  }
  std::string key = compare.substr(0, equals);
  std::vector<std::string> variants;
  size_t start = equals + 1;
  while (start <= compare.size()) {
    size_t comma = compare.find(',', start);
    std::string value =
        compare.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (value.empty()) {
      fail(kUnknownSite, fmt::format("--compare '{}': an empty value", compare));
    }
    variants.push_back(key + "=" + value);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return variants;
}

CostRow run_variant(const BenchCostOptions& options, const train::QualityTarget& target,
                    const std::string& variant, const fs::path& runs_dir) {
  std::vector<std::string> overrides = options.overrides;
  overrides.push_back(fmt::format("train.epochs={}", options.max_epochs));
  overrides.push_back(fmt::format("experiment.runs_dir=\"{}\"", runs_dir.string()));
  overrides.push_back("tracking.catalog=false");
  overrides.push_back("tracking.tensorboard=false");
  if (!variant.empty()) overrides.push_back(variant);
  train::TrainConfig config = train::load_config(options.config, overrides);
  train::TrainOptions train_options;
  train_options.quiet = true;
  train_options.stop_at = target;
  train::TrainSummary summary = train::train(config, train_options);

  CostRow row;
  row.variant = variant;
  row.reached = summary.target_epoch > 0;
  row.epochs = row.reached ? summary.target_epoch : options.max_epochs;
  row.steps = summary.steps;
  row.examples = summary.steps * config.train.batch_size * config.train.accumulate;
  row.seconds = summary.seconds;
  row.test_accuracy = summary.test_accuracy;
  row.test_loss = summary.test_loss;
  row.run_dir = summary.run_dir;
  std::string roofline = track::read_run_info(summary.run_dir).section("roofline");
  if (!roofline.empty()) {
    json r = json::parse(roofline);
    if (r.contains("flops")) row.flops = r["flops"].get<double>() * static_cast<double>(row.steps);
  }
  // What a remat policy or a precision buys is memory: the step's observed peak.
  std::string memory = track::read_run_info(summary.run_dir).section("memory");
  if (!memory.empty()) {
    json m = json::parse(memory);
    if (m.contains("observed_peak_bytes")) row.peak_bytes = m["observed_peak_bytes"].get<int64_t>();
  }
  return row;
}

std::string table(const std::vector<CostRow>& rows, const train::QualityTarget& target,
                  int64_t max_epochs) {
  std::string text =
      fmt::format("{:<30} {:>8} {:>6} {:>7} {:>10} {:>9} {:>11} {:>10} {:>11} {:>10} {:>9}\n",
                  "variant", "reached", "epochs", "steps", "examples", "seconds", "train FLOP",
                  "us/example", "FLOP/example", "peak mem", "vs first");
  for (const CostRow& row : rows) {
    std::string flops = row.flops < 0 ? "n/a" : fmt::format("{:.3g}", row.flops);
    std::string per_example = row.flops < 0 || row.examples == 0
                                  ? "n/a"
                                  : fmt::format("{:.3g}", row.flops / row.examples);
    std::string peak = row.peak_bytes < 0 ? "n/a" : format_byte_size(row.peak_bytes);
    text += fmt::format(
        "{:<30} {:>8} {:>6} {:>7} {:>10} {:>9.2f} {:>11} {:>10.2f} {:>11} {:>10} {:>8.2f}x\n",
        row.variant.empty() ? "(the config)" : row.variant, row.reached ? "yes" : "no", row.epochs,
        row.steps, row.examples, row.seconds, flops,
        row.examples ? 1e6 * row.seconds / row.examples : 0.0, per_example, peak,
        rows.front().seconds > 0 ? row.seconds / rows.front().seconds : 0.0);
  }
  text += fmt::format(
      "target: {} {} {}; a row that did not reach it ran all {} epochs (its cost is a lower "
      "bound). seconds: the whole run (data, compilation, evaluations); train FLOP: the train "
      "steps' (cost rules, recomputation included), evaluation not counted; peak mem: the "
      "allocator's peak over the run's profiled steps.\n",
      target.metric, target.metric == "test_loss" ? "<=" : ">=", target.value, max_epochs);
  return text;
}

json to_json(const std::vector<CostRow>& rows, const train::QualityTarget& target) {
  json out = {{"target", {{"metric", target.metric}, {"value", target.value}}},
              {"rows", json::array()}};
  for (const CostRow& row : rows) {
    out["rows"].push_back(
        {{"variant", row.variant},
         {"reached", row.reached},
         {"epochs", row.epochs},
         {"steps", row.steps},
         {"examples", row.examples},
         {"seconds", row.seconds},
         {"train_flops", row.flops < 0 ? json(nullptr) : json(row.flops)},
         {"peak_bytes", row.peak_bytes < 0 ? json(nullptr) : json(row.peak_bytes)},
         {"test_accuracy", row.test_accuracy},
         {"test_loss", row.test_loss},
         {"run_dir", row.run_dir.string()}});
  }
  return out;
}

int bench_cost(const BenchCostOptions& options) {
  train::QualityTarget target = parse_target(options.target);
  std::vector<std::string> variants = variants_of(options.compare);
  fs::path scratch = fs::temp_directory_path() / fmt::format("kiln-bench-cost-{}", ::getpid());
  fs::path runs_dir = options.runs_dir.empty() ? scratch : fs::path(options.runs_dir);
  std::vector<CostRow> rows;
  for (size_t i = 0; i < variants.size(); ++i) {
    std::fprintf(stderr,
                 "bench cost: %zu/%zu %s: training until %s reaches %g (at most %lld "
                 "epochs)\n",
                 i + 1, variants.size(), variants[i].empty() ? "the config" : variants[i].c_str(),
                 target.metric.c_str(), target.value, static_cast<long long>(options.max_epochs));
    rows.push_back(run_variant(options, target, variants[i], runs_dir));
  }
  train::print_best_effort(stdout, options.json ? to_json(rows, target).dump(2) + "\n"
                                                : table(rows, target, options.max_epochs));
  if (options.runs_dir.empty()) fs::remove_all(scratch);
  return 0;
}

}  // namespace

void add_bench_cost_command(CLI::App& bench, std::function<int()>* runner) {
  auto options = std::make_shared<BenchCostOptions>();
  CLI::App* cost = bench.add_subcommand(
      "cost",
      "The cost to reach a quality: trains CONFIG (and each --compare variant) until the test "
      "metric reaches --target or --max-epochs pass, and prints wall time, examples, training "
      "FLOPs and cost per example side by side (docs/performance.md)");
  cost->add_option("config", options->config, "the TOML config")->required();
  cost->add_option("--target", options->target,
                   "test_accuracy=FRACTION (at least) or test_loss=VALUE (at most)")
      ->required();
  cost->add_option("--compare", options->compare,
                   "KEY=V1,V2,...: one run per value of one config key, e.g. "
                   "model.compute_dtype=f32,bf16");
  cost->add_option("--max-epochs", options->max_epochs, "give up after this many epochs")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  cost->add_option("--set", options->overrides,
                   "override a key: section.key=value, or model.layers[N].field=value");
  cost->add_option("--runs-dir", options->runs_dir,
                   "keep the runs there (default: a temporary directory, removed)");
  cost->add_flag("--json", options->json, "print the rows as JSON");
  *runner = [options] { return bench_cost(*options); };
}

}  // namespace kiln::cli
