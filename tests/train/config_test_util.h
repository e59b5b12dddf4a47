// Helpers shared by the config tests: parse a text as "config.toml" and catch the
// message (or hint) of the kiln::Error it raises.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "kiln/error.h"
#include "train/config.h"

namespace kiln::train::config_test {

inline const std::string kOneLayer = "[[model.layers]]\ntype = \"dense\"\nfeatures = 10\n";

inline TrainConfig parse(const std::string& text, const std::vector<std::string>& overrides = {}) {
  return parse_config(text, "config.toml", overrides);
}

// The error message (without the hint) raised by `action`, or "" when none.
inline std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const Error& e) {
    return e.message();
  }
  return "";
}

inline std::string parse_error(const std::string& text,
                               const std::vector<std::string>& overrides = {}) {
  return error_of([&] { (void)parse(text, overrides); });
}

inline std::string hint_of(const std::string& text) {
  try {
    (void)parse(text);
  } catch (const Error& e) {
    return e.hint();
  }
  return "";
}

}  // namespace kiln::train::config_test
