// Run identities and their differences (run_identity.h).
#include "train/run_identity.h"

#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "io/json_text.h"
#include "io/sha256.h"

namespace kiln::train {
namespace {

using nlohmann::json;

// A TOML value as written, without the comment to_toml puts after it ("0.001  # help").
std::string without_comment(const std::string& text) {
  size_t end = text.size();
  bool quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && quoted) {
      ++i;
    } else if (text[i] == '"') {
      quoted = !quoted;
    } else if (text[i] == '#' && !quoted) {
      end = i;
      break;
    }
  }
  while (end > 0 && (text[end - 1] == ' ' || text[end - 1] == '\t')) --end;
  return text.substr(0, end);
}

}  // namespace

std::map<std::string, std::string> config_keys(const std::string& toml) {
  std::map<std::string, std::string> keys;
  std::istringstream lines(toml);
  std::string section;
  int layer = -1;
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line.front() == '#') continue;
    if (line.starts_with("[[")) {
      section = fmt::format("{}[{}]", line.substr(2, line.find("]]") - 2), ++layer);
      continue;
    }
    if (line.front() == '[') {
      section = line.substr(1, line.find(']') - 1);
      continue;
    }
    size_t equals = line.find(" = ");
    if (equals == std::string::npos) continue;
    keys[fmt::format("{}.{}", section, line.substr(0, equals))] =
        without_comment(line.substr(equals + 3));
  }
  return keys;
}

track::RunIdentityRecord RunIdentity::record() const {
  return {config_sha256, data_sha256, kernels, kiln_version};
}

RunIdentity RunIdentity::from_record(const track::RunIdentityRecord& record) {
  return {"", record.config_sha256, record.data_sha256, record.kiln_version, record.kernels};
}

RunIdentity run_identity(const std::string& resolved_config, const std::string& data_sha256,
                         const std::string& kernels) {
  return {resolved_config, io::sha256_hex(resolved_config), data_sha256, kKilnVersion, kernels};
}

std::string identity_json_text(const RunIdentity& identity) {
  return io::json_text(json{{"config", identity.config},
                            {"config_sha256", identity.config_sha256},
                            {"data_sha256", identity.data_sha256},
                            {"kiln_version", identity.kiln_version},
                            {"kernels", identity.kernels}});
}

RunIdentity parse_identity(std::string_view json_text) {
  json object = json::parse(json_text, nullptr, false);
  auto text = [&](const char* key) {
    return object.is_object() && object.contains(key) && object[key].is_string()
               ? object[key].get<std::string>()
               : std::string();
  };
  return {text("config"), text("config_sha256"), text("data_sha256"), text("kiln_version"),
          text("kernels")};
}

std::vector<std::string> identity_differences(const RunIdentity& saved, const RunIdentity& now) {
  std::vector<std::string> differences;
  auto shown = [](const std::string& value) { return value.empty() ? "(none)" : value; };
  if (saved.config_sha256 != now.config_sha256) {
    auto before = config_keys(saved.config);
    auto after = config_keys(now.config);
    std::set<std::string> names;
    for (const auto& [name, value] : before) names.insert(name);
    for (const auto& [name, value] : after) names.insert(name);
    for (const std::string& name : names) {
      auto was = before.find(name);
      auto is = after.find(name);
      std::string old_value = was == before.end() ? "(absent)" : was->second;
      std::string new_value = is == after.end() ? "(absent)" : is->second;
      if (old_value != new_value) {
        differences.push_back(fmt::format("config {}: {} -> {}", name, old_value, new_value));
      }
    }
    if (differences.empty()) differences.push_back("config: the resolved text differs");
  }
  const std::pair<const char*, std::string RunIdentity::*> fields[] = {
      {"data_sha256", &RunIdentity::data_sha256},
      {"kiln_version", &RunIdentity::kiln_version},
      {"kernels", &RunIdentity::kernels}};
  for (const auto& [key, field] : fields) {
    if (saved.*field != now.*field) {
      differences.push_back(
          fmt::format("{}: {} -> {}", key, shown(saved.*field), shown(now.*field)));
    }
  }
  return differences;
}

}  // namespace kiln::train
