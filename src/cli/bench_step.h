// `kiln bench step` and `kiln bench machine` (bench_step.cc).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace kiln::cli {

struct BenchStepOptions {
  std::string config;
  std::vector<std::string> overrides;
  int64_t steps = 60;
  std::string runs_dir;
  bool json = false;
};

struct BenchMachineOptions {
  bool refresh = false;
  bool json = false;
};

// Adds `step` and `machine` under `bench`; each runner runs its command.
void add_bench_step_commands(CLI::App& bench, std::function<int()>* step_runner,
                             std::function<int()>* machine_runner);

}  // namespace kiln::cli
