// Escaping, number formatting and tables of run.json values for `kiln report`.
#include "track/report_html.h"

#include <algorithm>
#include <cmath>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace kiln::track::html {
namespace {

using nlohmann::json;

bool is_scalar(const json& value) {
  return !value.is_object() && !value.is_array();
}

bool is_array_of_objects(const json& value) {
  if (!value.is_array() || value.empty()) return false;
  for (const json& element : value) {
    if (!element.is_object()) return false;
  }
  return true;
}

std::string join_key(const std::string& prefix, const std::string& key) {
  return prefix.empty() ? key : prefix + "." + key;
}

}  // namespace

std::string escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string number(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  return fmt::format("{:.6g}", value);
}

std::string cell_text(const json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_number_integer() || value.is_boolean() || value.is_null()) return value.dump();
  if (value.is_number()) return number(value.get<double>());
  if (value.is_array()) {
    bool scalars = true;
    for (const json& element : value) scalars = scalars && is_scalar(element);
    if (scalars) {
      // Texts (compile reasons, problems) may hold commas themselves: one per line.
      std::string text;
      for (const json& element : value) {
        if (!text.empty()) text += element.is_string() ? "\n" : ", ";
        text += cell_text(element);
      }
      return text.empty() ? "(none)" : text;
    }
  }
  return value.dump();
}

Rows flatten(const json& object, const std::string& prefix) {
  Rows rows;
  if (!object.is_object()) {
    rows.emplace_back(prefix.empty() ? "value" : prefix, cell_text(object));
    return rows;
  }
  for (const auto& [key, value] : object.items()) {
    std::string name = join_key(prefix, key);
    if (value.is_object() && !value.empty()) {
      Rows nested = flatten(value, name);
      rows.insert(rows.end(), nested.begin(), nested.end());
    } else if (!is_array_of_objects(value)) {
      rows.emplace_back(name, cell_text(value));
    }
  }
  return rows;
}

std::vector<std::pair<std::string, const json*>> object_arrays(const json& object,
                                                               const std::string& prefix) {
  std::vector<std::pair<std::string, const json*>> arrays;
  if (!object.is_object()) return arrays;
  for (const auto& [key, value] : object.items()) {
    std::string name = join_key(prefix, key);
    if (is_array_of_objects(value)) {
      arrays.emplace_back(name, &value);
    } else if (value.is_object()) {
      auto nested = object_arrays(value, name);
      arrays.insert(arrays.end(), nested.begin(), nested.end());
    }
  }
  return arrays;
}

std::string key_value_table(const Rows& rows) {
  if (rows.empty()) return "<p class=\"note\">not recorded</p>\n";
  std::string out = "<table class=\"kv\">\n";
  for (const auto& [key, value] : rows) {
    out += fmt::format("<tr><th>{}</th><td>{}</td></tr>\n", escape(key), escape(value));
  }
  return out + "</table>\n";
}

std::string array_table(const json& array) {
  std::vector<Rows> cells;
  std::vector<std::string> columns;
  for (const json& element : array) {
    cells.push_back(flatten(element));
    for (const auto& [key, value] : cells.back()) {
      if (std::find(columns.begin(), columns.end(), key) == columns.end()) columns.push_back(key);
    }
  }
  std::string out = "<table class=\"grid\">\n<tr>";
  for (const std::string& column : columns) out += "<th>" + escape(column) + "</th>";
  out += "</tr>\n";
  for (const Rows& row : cells) {
    out += "<tr>";
    for (const std::string& column : columns) {
      auto found = std::find_if(row.begin(), row.end(),
                                [&](const auto& entry) { return entry.first == column; });
      out += "<td>" + (found == row.end() ? std::string() : escape(found->second)) + "</td>";
    }
    out += "</tr>\n";
  }
  return out + "</table>\n";
}

std::string json_tables(const json& value) {
  if (is_array_of_objects(value)) return array_table(value);
  if (!value.is_object()) return key_value_table({{"value", cell_text(value)}});
  std::string out = key_value_table(flatten(value));
  for (const auto& [name, array] : object_arrays(value)) {
    out += fmt::format("<h4>{}</h4>\n", escape(name)) + array_table(*array);
  }
  return out;
}

}  // namespace kiln::track::html
