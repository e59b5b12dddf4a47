// Artifact manifests (manifest.json of `kiln export`, which `kiln predict` and
// Artifact::load read first) through artifact::parse_manifest. Properties: what parses
// writes back as text that parses to the same manifest (the same text again), and what does
// not parse fails with a kiln::Error that has a message.
#include <cstdint>
#include <string>
#include <string_view>

#include "artifact/manifest.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  kiln::artifact::Manifest manifest;
  if (!kiln::fuzz::parses(
          [&] { manifest = kiln::artifact::parse_manifest(text, "manifest.json"); })) {
    return 0;
  }
  std::string written = kiln::artifact::manifest_text(manifest);
  kiln::artifact::Manifest again;
  if (!kiln::fuzz::parses(
          [&] { again = kiln::artifact::parse_manifest(written, "manifest.json"); })) {
    kiln::fuzz::finding("a manifest that parsed did not parse again once written");
  }
  if (kiln::artifact::manifest_text(again) != written) {
    kiln::fuzz::finding("a manifest changed on its second writing");
  }
  return 0;
}
