// Runs a peer check (tests/tools/<script>, which compares kiln's results with the real
// library's) on a JSON record of kiln's side, and returns its exit status and report.
#pragma once

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "support/scratch_dir.h"
#include "support/source_tree.h"

namespace kiln::testing {

struct PeerReport {
  int status = 0;
  std::string text;
};

inline PeerReport run_peer_check(const std::string& script, const nlohmann::json& record) {
  ScratchDir dir;
  std::ofstream(dir / "kiln.json") << record.dump();
  std::string command = fmt::format("/usr/bin/python3 {}/tests/tools/{} {} > {} 2>&1",
                                    kiln::testing::source_dir().string(), script,
                                    (dir / "kiln.json").string(), (dir / "out").string());
  int status = std::system(command.c_str());
  std::ifstream out(dir / "out");
  return {status,
          std::string((std::istreambuf_iterator<char>(out)), std::istreambuf_iterator<char>())};
}

}  // namespace kiln::testing
