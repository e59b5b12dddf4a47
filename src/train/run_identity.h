// What makes a run this run, for `kiln resume`: the resolved config, the data actually
// trained on (the dataset identity, data::Dataset::identity), the kiln version and the kernels
// setting (KILN_KERNELS changes the weights' bits). A savepoint records it; resuming compares it
// with what the run would be now and lists every difference, key by key.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kiln/version.h"

namespace kiln::train {

inline constexpr const char* kKilnVersion = kiln::kVersion;

nlohmann::json run_identity(const std::string& resolved_config, const std::string& data_sha256,
                            const std::string& kernels);

// "section.key" -> value text of a resolved config (to_toml's output: one key per line;
// the layers numbered model.layers[i].key), so that differences can be named by key.
std::map<std::string, std::string> config_keys(const std::string& toml);

// One line per difference, "what: saved -> now" ("config train.epochs: 2 -> 3", "data
// sha256: ... -> ..."), sorted; empty when the identities agree.
std::vector<std::string> identity_differences(const nlohmann::json& saved,
                                              const nlohmann::json& now);

}  // namespace kiln::train
