// Run identities and their differences (run_identity.h).
#include "train/run_identity.h"

#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>

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

json run_identity(const std::string& resolved_config, const std::string& data_sha256,
                  const std::string& kernels) {
  return {{"config", resolved_config},
          {"config_sha256", io::sha256_hex(resolved_config)},
          {"data_sha256", data_sha256},
          {"kiln_version", kKilnVersion},
          {"kernels", kernels}};
}

std::vector<std::string> identity_differences(const json& saved, const json& now) {
  std::vector<std::string> differences;
  auto text = [](const json& identity, const char* key) {
    return identity.contains(key) && identity[key].is_string() ? identity[key].get<std::string>()
                                                               : std::string("(none)");
  };
  if (text(saved, "config_sha256") != text(now, "config_sha256")) {
    auto before = config_keys(text(saved, "config"));
    auto after = config_keys(text(now, "config"));
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
  for (const char* key : {"data_sha256", "kiln_version", "kernels"}) {
    if (text(saved, key) != text(now, key)) {
      differences.push_back(fmt::format("{}: {} -> {}", key, text(saved, key), text(now, key)));
    }
  }
  return differences;
}

}  // namespace kiln::train
