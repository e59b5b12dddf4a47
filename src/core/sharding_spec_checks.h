// Checks on a ShardingSpec (kiln/shape.h) that need no mesh, shared by the program text
// parser and NamedSharding so that both refuse the same specs with the same words.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "kiln/shape.h"

namespace kiln {

// The first mesh axis that `spec` uses more than once, or nullopt: an axis splits at most
// one dimension, once.
std::optional<std::string> repeated_axis(const ShardingSpec& spec);

// "the sharding {data,data} uses mesh axis 'data' twice" (`what` names the spec).
std::string repeated_axis_message(std::string_view what, const ShardingSpec& spec,
                                  const std::string& axis);
inline constexpr const char* kRepeatedAxisHint =
    "each mesh axis splits at most one dimension, once";

}  // namespace kiln
