// `kiln verify ARTIFACT` and `kiln reproduce ARTIFACT` (docs/artifacts.md): the artifact
// checked against itself and its data, and its model trained again from its config.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace kiln::artifact {

struct Check {
  bool ok = false;
  std::string what;  // "files: 5 match their SHA-256", "data: ... changed"
};

// Loads the artifact (its files against the manifest, the program parsed and verified),
// loads the data its config names and compares its identity with the manifest's, and
// evaluates the artifact on that test split again: the same predictions right as the
// manifest and the model card state. A check that cannot run (no data) is a failed one.
std::vector<Check> verify_artifact(const std::filesystem::path& dir);

struct Reproduction {
  std::filesystem::path run_dir;         // the new run
  std::string params_sha256;             // of its final weights
  std::string expected_sha256;           // the artifact's
  std::vector<std::string> differences;  // what differs from the artifact's source, if any
  bool same() const { return params_sha256 == expected_sha256; }
};

// Trains the artifact's config.toml again, its runs under `runs_dir`, and compares the
// final weights' SHA-256 with the artifact's; when they differ, says what else differs
// (the data's identity, kiln's version, the kernels, the code's commit).
Reproduction reproduce_artifact(const std::filesystem::path& dir,
                                const std::filesystem::path& runs_dir);

}  // namespace kiln::artifact
