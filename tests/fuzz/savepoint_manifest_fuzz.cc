// Savepoint manifests (manifest.json: the part of a savepoint parsed as text, which kiln
// resume reads first) through savepoint::load. One valid savepoint of a small state is
// written once under /dev/shm; each input replaces its manifest, with a COMMITTED marker
// that matches it, so that the input gets past the commit check to the manifest's fields.
// Properties: no name in the manifest leads outside the savepoint, what loads is what the
// manifest describes (the step, and each tree's leaves), and the run identity in it reads
// back the same once written again.
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "fuzz_support.h"
#include "io/bounded_read.h"
#include "io/savepoint.h"
#include "io/sha256.h"
#include "kiln/ops.h"
#include "kiln/tree.h"
#include "train/run_identity.h"

namespace {

namespace fs = std::filesystem;

// The savepoint every input is tried in: params {w f32[2,3], b f32[3]} and an empty tree.
fs::path make_savepoint() {
  fs::path dir = fs::path("/dev/shm") / ("kiln-fuzz-savepoint-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  kiln::Tree params = kiln::Tree::dict(
      {{"w", kiln::Tree(kiln::ones({2, 3}))}, {"b", kiln::Tree(kiln::zeros({3}))}});
  kiln::savepoint::Snapshot snapshot;
  snapshot.step = 7;
  snapshot.trees.emplace_back("params", kiln::savepoint::copy_tree("params", params));
  snapshot.state_json = R"({"data":{"epoch":0,"position":1}})";
  snapshot.identity_json = R"({"config_sha256":"0"})";
  fs::path written = kiln::savepoint::write(dir, snapshot);
  // tests/fuzz/make_seeds.py takes this valid manifest as this target's seed, and the
  // weights file as a small safetensors file that kiln wrote.
  if (const char* out = std::getenv("KILN_FUZZ_SEED_DIR")) {
    for (const char* name : {"manifest.json", "params.safetensors"}) {
      fs::copy_file(written / name, fs::path(out) / name, fs::copy_options::overwrite_existing);
    }
  }
  return written;
}

void write_text(const fs::path& path, const uint8_t* data, size_t size) {
  kiln::fuzz::InputFile::write_to(path, data, size);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const fs::path savepoint = make_savepoint();
  std::string text(reinterpret_cast<const char*>(data), size);
  write_text(savepoint / kiln::savepoint::kManifestName, data, size);
  std::string marker =
      nlohmann::json({{"manifest_sha256", kiln::io::sha256_hex(text)}}).dump() + "\n";
  write_text(savepoint / kiln::savepoint::kMarkerName,
             reinterpret_cast<const uint8_t*>(marker.data()), marker.size());
  kiln::savepoint::Loaded loaded;
  if (!kiln::fuzz::parses([&] { loaded = kiln::savepoint::load(savepoint); })) return 0;
  // Loaded, so valid JSON within kiln's nesting limit.
  const nlohmann::json manifest = kiln::io::parse_json(text, "manifest.json");
  if (loaded.step != manifest["step"].get<int64_t>()) kiln::fuzz::finding("load: another step");
  for (const auto& [name, record] : manifest["files"].items()) {
    if (name.empty() || name.front() == '.' || name.find('/') != std::string::npos) {
      kiln::fuzz::finding("load accepted a file name that leads outside the savepoint");
    }
  }
  if (loaded.trees.size() != manifest["trees"].size()) {
    kiln::fuzz::finding("load: another number of trees than the manifest lists");
  }
  for (const auto& [name, leaves] : loaded.trees) {
    if (leaves.size() != manifest["trees"][name]["leaves"].size()) {
      kiln::fuzz::finding("load: a tree with another number of leaves than the manifest lists");
    }
  }
  // What kiln resume reads next (train/resume_point.cc): the run identity the savepoint was
  // written under, which must read back the same once written as kiln writes it.
  kiln::train::RunIdentity identity = kiln::train::parse_identity(loaded.identity_json);
  kiln::train::RunIdentity again =
      kiln::train::parse_identity(kiln::train::identity_json_text(identity));
  if (!kiln::train::identity_differences(identity, again).empty() ||
      again.config != identity.config) {
    kiln::fuzz::finding("a run identity changed on being written and read again");
  }
  return 0;
}
