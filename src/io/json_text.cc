#include "io/json_text.h"

#include <nlohmann/json.hpp>

namespace kiln::io {

std::string json_text(const nlohmann::json& value, int indent) {
  return value.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace kiln::io
