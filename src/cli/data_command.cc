// `kiln data validate CONFIG`: reads the config's dataset, checks it against the contracts of
// [data.features] and [data.label], and prints the report (records read, violations by rule
// with the first record indices, class histograms, the dataset identity). Exit status 0 when
// the data meets its contracts, 3 when it does not, 1 for errors (config, unreadable files).
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/output.h"
#include "data/dataset.h"
#include "io/json_text.h"
#include "train/builders.h"
#include "train/config.h"
#include "train/progress.h"

namespace kiln::cli {
namespace {

struct DataCommandOptions {
  std::string config;
  std::vector<std::string> overrides;
  bool json = false;
};

int validate(const DataCommandOptions& options) {
  train::TrainConfig config = train::load_config(options.config, options.overrides);
  data::Dataset dataset =
      data::load_dataset(train::build_dataset_spec(config.data), data::ViolationPolicy::kReport);
  bool clean = dataset.train_report.violations.empty() && dataset.test_report.violations.empty();
  if (options.json) {
    nlohmann::json report = dataset.to_json();
    report["config_file"] = config.source;
    report["valid"] = clean;
    print_result(io::json_text(report, 2) + "\n");
    return clean ? 0 : 3;
  }
  std::string text = fmt::format("# data of {} ({})\n", config.source, config.data.dataset);
  for (const data::SourceFile& file : dataset.files) {
    text += fmt::format("{:<15} {}  sha256 {}\n", file.role, file.path, file.sha256);
  }
  text += fmt::format("records: shape {} per record, {} classes, normalize {}\n",
                      dims_to_string(dataset.record_shape), dataset.num_classes, dataset.normalize);
  text += dataset.train_report.to_text();
  text += dataset.test_report.to_text();
  text += fmt::format("dataset identity: {}\n", dataset.identity);
  text += clean
              ? "valid: the data meets its contracts\n"
              : fmt::format(
                    "INVALID: {} violations in {} training and {} test records "
                    "(data.on_violation = \"{}\")\n",
                    dataset.train_report.violation_count() + dataset.test_report.violation_count(),
                    dataset.train_report.bad_record_count(), dataset.test_report.bad_record_count(),
                    config.data.on_violation);
  print_result(text);
  return clean ? 0 : 3;
}

}  // namespace

Runner add_data_command(CLI::App& app) {
  auto options = std::make_shared<DataCommandOptions>();
  CLI::App* data = app.add_subcommand("data", "Check a config's dataset against its contracts");
  data->require_subcommand(1);
  CLI::App* check = data->add_subcommand(
      "validate",
      "Read the dataset of CONFIG, check [data.features] and [data.label], print the report "
      "(exit 3 if the data violates them)");
  check->add_option("config", options->config, "the TOML config")->required();
  check->add_option("--set", options->overrides,
                    "override a key: section.key=value, or model.layers[N].field=value");
  check->add_flag("--json", options->json, "print the report as JSON");
  return [options] { return validate(*options); };
}

}  // namespace kiln::cli
