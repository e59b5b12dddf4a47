// Helpers shared by the tests that train: a fresh runs directory per test, quiet options,
// reading a run's JSON files, and a copy of a run as a kill would leave it.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "io/atomic_file.h"
#include "io/savepoint.h"
#include "support/source_tree.h"
#include "train/trainer.h"

namespace kiln::train::run_test {

// The directories fresh_dir gave out in this process, removed when it exits. A test that
// stops at a failed assertion skips its own cleanup, and some tests had none: runs of
// 11-75 MB each piled up in /tmp run after run until the disk was full.
inline std::vector<std::filesystem::path>& directories_to_remove() {
  static std::vector<std::filesystem::path> directories;
  return directories;
}

inline void remove_fresh_dirs() {
  for (const std::filesystem::path& dir : directories_to_remove()) {
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
  }
}

// An empty directory under the system's temporary one, unique to this suite, test and
// process (ctest may run test binaries side by side), removed when the process exits.
inline std::filesystem::path fresh_dir(const std::string& suite, const std::string& name) {
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              fmt::format("kiln-{}-test-{}-{}", suite, name, getpid());
  std::filesystem::remove_all(dir);
  if (directories_to_remove().empty()) std::atexit(remove_fresh_dirs);
  directories_to_remove().push_back(dir);
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

// The one run directory under `runs`/`experiment`; throws (a test failure, not a crash)
// when there is none, as after a run that failed before creating it.
inline std::filesystem::path only_run_dir(const std::filesystem::path& runs,
                                          const std::string& experiment) {
  std::vector<std::filesystem::path> found;
  std::error_code error;
  for (std::filesystem::directory_iterator it(runs / experiment, error), end; !error && it != end;
       it.increment(error)) {
    found.push_back(it->path());
  }
  if (found.size() != 1) {
    throw std::runtime_error(fmt::format("expected one run in '{}', found {}",
                                         (runs / experiment).string(), found.size()));
  }
  return found.front();
}

inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline nlohmann::json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

// Every line of a run's metrics.jsonl, parsed.
inline std::vector<nlohmann::json> read_metrics(const std::filesystem::path& run_dir) {
  std::vector<nlohmann::json> records;
  std::ifstream in(run_dir / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) records.push_back(nlohmann::json::parse(line));
  return records;
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
