// The value rules of the config schema (config_schema.h): checking a value against its
// constraint, saying the rule in words for errors and docs, writing a value as TOML, and
// the did-you-mean for misspelled names.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "train/config_schema.h"

namespace kiln::train::schema {
namespace {

// One path component that means the same on every file system and shell: no separator,
// no control character (a NUL made path functions loop; a newline breaks every listing).
bool valid_dir_name(const std::string& text) {
  if (text.empty() || text.size() > kMaxNameLength || text == "." || text == "..") return false;
  return std::all_of(text.begin(), text.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
  });
}

// Any printable text (UTF-8 included): only the C0 controls and DEL are refused.
bool valid_path(const std::string& text) {
  if (text.empty() || text.size() > kMaxPathLength) return false;
  return std::none_of(text.begin(), text.end(), [](char c) {
    auto byte = static_cast<unsigned char>(c);
    return byte < 0x20 || byte == 0x7f;
  });
}

}  // namespace

std::string_view type_phrase(Type type) {
  switch (type) {
    case Type::kString:
      return "a string";
    case Type::kInteger:
      return "an integer";
    case Type::kFloat:
      return "a float";
    case Type::kBool:
      return "a boolean";
    case Type::kIntegerArray:
      return "an array of integers";
    case Type::kStringArray:
      return "an array of strings";
    case Type::kLayers:
      return "an array of tables ([[model.layers]])";
  }
  return "a value";
}

std::string rule_text(Type type, const Constraint& constraint, bool article) {
  if (!constraint.choices.empty()) return "one of " + join(constraint.choices);
  std::string text(type_phrase(type));
  if (type == Type::kIntegerArray && constraint.length > 0) {
    text = fmt::format("an array of {} integers", constraint.length);
  }
  if (constraint.dir_name) {
    text =
        fmt::format("a directory name of 1 to {} letters, digits, '.', '_' or '-'", kMaxNameLength);
  } else if (constraint.path) {
    text = fmt::format("a non-empty path of at most {} printable characters", kMaxPathLength);
  } else if (constraint.non_empty) {
    text = "a non-empty string";
  }
  auto bound = [](double value) { return fmt::format("{}", value); };
  if (constraint.min && constraint.max) {
    text +=
        fmt::format(" in {}{}, {}{}", constraint.min_exclusive ? "(" : "[", bound(*constraint.min),
                    bound(*constraint.max), constraint.max_exclusive ? ")" : "]");
  } else if (constraint.min) {
    text += fmt::format(" {} {}", constraint.min_exclusive ? ">" : ">=", bound(*constraint.min));
  } else if (constraint.max) {
    text += fmt::format(" {} {}", constraint.max_exclusive ? "<" : "<=", bound(*constraint.max));
  }
  if (constraint.min_nonzero)
    text += fmt::format(", 0 or at least {}", bound(*constraint.min_nonzero));
  if (constraint.may_be_empty) text += " (or empty)";
  if (constraint.allow_infinite) text += " (or -inf, inf)";
  if (!article) text = text.substr(text.find(' ') + 1);
  return text;
}

bool satisfies(const Value& value, const Constraint& constraint) {
  auto in_range = [&](double x) {
    if (std::isnan(x)) return false;
    if (constraint.min && (constraint.min_exclusive ? x <= *constraint.min : x < *constraint.min)) {
      return false;
    }
    if (constraint.max && (constraint.max_exclusive ? x >= *constraint.max : x > *constraint.max)) {
      return false;
    }
    return true;
  };
  if (const auto* text = std::get_if<std::string>(&value)) {
    if (constraint.may_be_empty && text->empty()) return true;
    if (!constraint.choices.empty()) {
      return std::find(constraint.choices.begin(), constraint.choices.end(), *text) !=
             constraint.choices.end();
    }
    if (constraint.non_empty && text->empty()) return false;
    if (constraint.dir_name) return valid_dir_name(*text);
    if (constraint.path) return valid_path(*text);
    return true;
  }
  if (const auto* integer = std::get_if<int64_t>(&value)) {
    return in_range(static_cast<double>(*integer));
  }
  if (const auto* real = std::get_if<double>(&value)) {
    if (constraint.min_nonzero && *real != 0 && std::abs(*real) < *constraint.min_nonzero) {
      return false;
    }
    if (constraint.allow_infinite && std::isinf(*real)) return true;
    return std::isfinite(*real) && in_range(*real);
  }
  if (const auto* array = std::get_if<std::vector<int64_t>>(&value)) {
    if (constraint.length > 0 && array->size() != constraint.length) return false;
    return std::all_of(array->begin(), array->end(),
                       [&](int64_t x) { return in_range(static_cast<double>(x)); });
  }
  if (const auto* strings = std::get_if<std::vector<std::string>>(&value)) {
    return std::none_of(strings->begin(), strings->end(), [&](const std::string& text) {
      return constraint.non_empty && text.empty();
    });
  }
  return true;
}

std::string format_value(const Value& value) {
  if (const auto* strings = std::get_if<std::vector<std::string>>(&value)) {
    std::vector<std::string> quoted;
    for (const std::string& text : *strings) quoted.push_back(format_value(text));
    return fmt::format("[{}]", fmt::join(quoted, ", "));
  }
  if (const auto* text = std::get_if<std::string>(&value)) {
    std::string quoted = "\"";
    for (char c : *text) {
      auto byte = static_cast<unsigned char>(c);
      if (c == '"' || c == '\\') {
        quoted += '\\';
        quoted += c;
      } else if (byte < 0x20 || byte == 0x7f) {
        quoted += fmt::format("\\u{:04X}", byte);
      } else {
        quoted += c;
      }
    }
    return quoted + "\"";
  }
  if (const auto* integer = std::get_if<int64_t>(&value)) return fmt::format("{}", *integer);
  if (const auto* real = std::get_if<double>(&value)) {
    if (std::isnan(*real)) return "nan";
    if (std::isinf(*real)) return *real > 0 ? "inf" : "-inf";
    std::string text = fmt::format("{}", *real);  // shortest text that reads back exactly
    if (text.find_first_of(".e") == std::string::npos) text += ".0";
    return text;
  }
  if (const auto* flag = std::get_if<bool>(&value)) return *flag ? "true" : "false";
  const auto& array = std::get<std::vector<int64_t>>(value);
  return fmt::format("[{}]", fmt::join(array, ", "));
}

std::string join(const std::vector<std::string_view>& words, std::string_view separator) {
  return fmt::format("{}", fmt::join(words, separator));
}

}  // namespace kiln::train::schema
