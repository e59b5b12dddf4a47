// Helpers shared by the tests that train: a fresh runs directory per test, quiet options,
// and reading a run's JSON files.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

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

inline TrainOptions quiet() {
  TrainOptions options;
  options.quiet = true;
  return options;
}

inline nlohmann::json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

}  // namespace kiln::train::run_test
