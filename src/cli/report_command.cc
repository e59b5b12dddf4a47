// `kiln report RUN [RUN...] [-o FILE]`: one self-contained HTML file describing training
// runs, several overlaid in the same charts (docs/profiling.md, "The HTML report").
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/commands.h"
#include "track/report.h"

namespace kiln::cli {
namespace {

struct ReportOptions {
  std::vector<std::string> runs;
  std::string out;  // empty: <first run>/report.html
};

int run_report(const ReportOptions& options) {
  std::filesystem::path out = options.out.empty()
                                  ? std::filesystem::path(options.runs.front()) / "report.html"
                                  : std::filesystem::path(options.out);
  track::check_report_destination(out);  // before the work
  std::vector<track::RunData> runs;
  for (const std::string& run : options.runs) runs.push_back(track::load_run_data(run));
  track::write_report(out, runs);
  fmt::print("{}\n", out.string());
  return 0;
}

}  // namespace

Runner add_report_command(CLI::App& app) {
  auto* command = app.add_subcommand(
      "report", "Write a self-contained HTML report of training runs (several: overlaid)");
  command->footer(
      "The report is one HTML file with inline CSS and SVG (no script, nothing fetched): the\n"
      "run's status and final test accuracy and loss, the training loss and learning rate per\n"
      "step, test and train accuracy and loss per epoch, a histogram of step times, the run's\n"
      "identity, environment, compilation, data loading and savepoints, and its config.\n"
      "With several runs each has its own color in every chart. It is made from run.json,\n"
      "config.toml and metrics.jsonl alone, so any run directory can be reported, also a\n"
      "failed or running one. See docs/profiling.md.\n"
      "Examples:\n"
      "  kiln report runs/fashion_mnist_mlp/20261202-155259-5726a86d\n"
      "  kiln report runs/mlp/RUN_A runs/mlp/RUN_B -o compare.html");
  auto options = std::make_shared<ReportOptions>();
  command->add_option("RUN", options->runs, "Run directories (<runs_dir>/<experiment>/<run-id>)")
      ->required()
      ->check(CLI::ExistingDirectory);
  command->add_option("-o,--output", options->out,
                      "The HTML file to write (default: report.html in the first RUN)");
  return [options] { return run_report(*options); };
}

}  // namespace kiln::cli
