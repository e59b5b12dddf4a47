// Config: TOML text -> validated TrainConfig, through parse_config (what load_config runs
// on a file's text). Property: a config that validates writes (to_toml) as TOML that
// parses to a config writing the same text.
#include <cstdint>
#include <string>

#include "fuzz_support.h"
#include "train/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // load_config refuses files over kMaxConfigBytes before parsing; so does this target.
  if (size > kiln::train::kMaxConfigBytes) return 0;
  std::string text(reinterpret_cast<const char*>(data), size);
  kiln::train::TrainConfig config;
  if (!kiln::fuzz::parses([&] { config = kiln::train::parse_config(text, "fuzz.toml"); })) return 0;
  std::string written = kiln::train::to_toml(config);
  std::string again;
  bool reparsed = kiln::fuzz::parses(
      [&] { again = kiln::train::to_toml(kiln::train::parse_config(written, "written.toml")); });
  if (!reparsed) kiln::fuzz::finding("to_toml wrote a config that does not validate");
  if (again != written) kiln::fuzz::finding("to_toml -> parse -> to_toml changed the text");
  return 0;
}
