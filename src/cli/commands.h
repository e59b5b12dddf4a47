// The `kiln` subcommands. Each registers its options on the CLI11 app and returns the
// process exit code when run.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace kiln::cli {

using Runner = std::function<int()>;

Runner add_devices_command(CLI::App& app);
Runner add_bench_command(CLI::App& app);
Runner add_train_command(CLI::App& app);
Runner add_data_command(CLI::App& app);
Runner add_resume_command(CLI::App& app);
Runner add_runs_command(CLI::App& app);
Runner add_report_command(CLI::App& app);
Runner add_generate_command(CLI::App& app);
Runner add_export_command(CLI::App& app);
Runner add_predict_command(CLI::App& app);
Runner add_verify_command(CLI::App& app);
Runner add_reproduce_command(CLI::App& app);
Runner add_kernels_command(CLI::App& app);
Runner add_privacy_command(CLI::App& app);

}  // namespace kiln::cli
