// Fields of the records kiln reads back from disk (run.json, catalog rows). Those may have
// been edited or damaged, and nlohmann's value() throws a type_error, not a kiln::Error,
// when a field is there with another type ("status": 1): a field of the wrong type reads as
// absent here, so the record is judged on what it does hold.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace kiln::io {

// object[key] if `object` is an object holding a string there, else `fallback`.
std::string string_field(const nlohmann::json& object, std::string_view key,
                         std::string fallback = {});
// object[key] if `object` is an object holding an integer there, else `fallback`.
int64_t integer_field(const nlohmann::json& object, std::string_view key, int64_t fallback);

}  // namespace kiln::io
