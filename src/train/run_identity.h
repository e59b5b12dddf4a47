// What makes a run this run, for `kiln resume`: the resolved config, the data actually
// trained on (the dataset identity, data::Dataset::identity), the kiln version and the kernels
// setting (KILN_KERNELS changes the weights' bits). A savepoint records it; resuming compares it
// with what the run would be now and lists every difference, key by key.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/version.h"
#include "track/run_info.h"

namespace kiln::train {

inline constexpr const char* kKilnVersion = kiln::kVersion;

// An empty field is one the record did not hold (an older savepoint or run.json).
struct RunIdentity {
  std::string config;  // the resolved config's identity text (identity_toml)
  std::string config_sha256;
  std::string data_sha256;
  std::string kiln_version;
  std::string kernels;

  // What run.json records of it (not the config text: config.toml beside it has it).
  track::RunIdentityRecord record() const;
  static RunIdentity from_record(const track::RunIdentityRecord& record);
};

RunIdentity run_identity(const std::string& resolved_config, const std::string& data_sha256,
                         const std::string& kernels);

// As a savepoint's manifest and the ranks' exchange carry it: a JSON object's text with
// the keys config, config_sha256, data_sha256, kiln_version and kernels; and back (keys
// that are missing or not strings read as empty).
std::string identity_json_text(const RunIdentity& identity);
RunIdentity parse_identity(std::string_view json_text);

// "section.key" -> value text of a resolved config (to_toml's output: one key per line;
// the layers numbered model.layers[i].key), so that differences can be named by key.
std::map<std::string, std::string> config_keys(const std::string& toml);

// One line per difference, "what: saved -> now" ("config train.epochs: 2 -> 3", "data
// sha256: ... -> ..."), sorted; empty when the identities agree.
std::vector<std::string> identity_differences(const RunIdentity& saved, const RunIdentity& now);

}  // namespace kiln::train
