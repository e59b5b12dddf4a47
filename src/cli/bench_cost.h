// `kiln bench cost CONFIG --target METRIC=VALUE` (bench_cost.cc).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace kiln::cli {

struct BenchCostOptions {
  std::string config;
  std::string target;   // "test_accuracy=0.88" or "test_loss=0.35"
  std::string compare;  // "model.compute_dtype=f32,bf16": one row per value; "": one row
  int64_t max_epochs = 10;
  std::vector<std::string> overrides;
  std::string runs_dir;
  bool json = false;
};

// Adds `cost` under `bench`; the runner runs it.
void add_bench_cost_command(CLI::App& bench, std::function<int()>* runner);

}  // namespace kiln::cli
