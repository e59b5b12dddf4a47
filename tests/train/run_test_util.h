// Helpers shared by the tests that train: a fresh runs directory per test, quiet options,
// reading a run's JSON files, and a copy of a run as a kill would leave it.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "io/atomic_file.h"
#include "io/savepoint.h"
#include "support/source_tree.h"
#include "train/trainer.h"

namespace kiln::train::run_test {

// An empty directory under the system's temporary one, unique to this suite, test and
// process (ctest may run test binaries side by side).
inline std::filesystem::path fresh_dir(const std::string& suite, const std::string& name) {
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              fmt::format("kiln-{}-test-{}-{}", suite, name, getpid());
  std::filesystem::remove_all(dir);
  return dir;
}

// examples/fashion_mnist_mlp.toml with `overrides`, its runs written under `runs_dir`.
inline TrainConfig mlp_example(const std::filesystem::path& runs_dir,
                               std::vector<std::string> overrides) {
  overrides.push_back(fmt::format("experiment.runs_dir=\"{}\"", runs_dir.string()));
  return load_config(kiln::testing::source_dir() / "examples/fashion_mnist_mlp.toml", overrides);
}

inline TrainOptions quiet() {
  TrainOptions options;
  options.quiet = true;
  return options;
}

inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline nlohmann::json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

// A copy of `run_dir` under `where` as a run killed right after savepoint `step` would
// leave it: later savepoints and the final weights never written, run.json still
// "running" for a process that is gone.
inline std::filesystem::path killed_copy(const std::filesystem::path& run_dir,
                                         const std::filesystem::path& where, int64_t step) {
  namespace fs = std::filesystem;
  fs::create_directories(where);
  fs::path copy = where / run_dir.filename();
  fs::copy(run_dir, copy, fs::copy_options::recursive);
  for (const auto& entry : savepoint::list_committed(copy / "savepoints")) {
    if (entry.step > step) fs::remove_all(entry.path);
  }
  fs::remove(copy / "params.safetensors");
  nlohmann::json info = read_json(copy / "run.json");
  info["status"] = "running";
  info["pid"] = 999999999;  // no such process
  io::write_file_atomically(copy / "run.json", info.dump(2));
  return copy;
}

}  // namespace kiln::train::run_test
