// What makes a run this run, for `kiln resume`: the resolved config, the data actually
// trained on (the dataset identity, data::Dataset::identity), the kiln version and the kernels
// setting (KILN_KERNELS changes the weights' bits). A savepoint records it; resuming compares it
// with what the run would be now and lists every difference, key by key.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kiln::train {

inline constexpr const char* kKilnVersion = "0.1.0";

nlohmann::json run_identity(const std::string& resolved_config, const std::string& data_sha256,
                            const std::string& kernels);

// One line per difference, "what: saved -> now" ("config train.epochs: 2 -> 3", "data
// sha256: ... -> ..."), sorted; empty when the identities agree.
std::vector<std::string> identity_differences(const nlohmann::json& saved,
                                              const nlohmann::json& now);

}  // namespace kiln::train
