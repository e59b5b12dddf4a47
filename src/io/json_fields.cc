#include "io/json_fields.h"

#include <nlohmann/json.hpp>

namespace kiln::io {

std::string string_field(const nlohmann::json& object, std::string_view key, std::string fallback) {
  if (!object.is_object()) return fallback;
  auto field = object.find(key);
  if (field == object.end() || !field->is_string()) return fallback;
  return field->get<std::string>();
}

int64_t integer_field(const nlohmann::json& object, std::string_view key, int64_t fallback) {
  if (!object.is_object()) return fallback;
  auto field = object.find(key);
  if (field == object.end() || !field->is_number_integer()) return fallback;
  return field->get<int64_t>();
}

}  // namespace kiln::io
