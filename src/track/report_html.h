// The HTML pieces of `kiln report` that are not charts: escaping, number formatting and
// tables built from run.json's values. Every text that comes from a run's files goes
// through escape(), so a config string holding "<script>" is shown, never run.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace kiln::track::html {

// `text` as HTML text or a quoted attribute value: & < > " ' replaced by entities.
std::string escape(std::string_view text);

// A number for people: 6 significant digits, "nan", "inf", "-inf" for the others.
std::string number(double value);

// A JSON value as one cell: a string as it is, a number by number(), an array of scalars
// joined by ", ", anything else as compact JSON. Not escaped.
std::string cell_text(const nlohmann::json& value);

// The rows of a key/value table for a JSON object: nested objects flattened into dotted
// keys ("cpu.model"), in key order. Arrays of objects are left out (see object_arrays).
using Rows = std::vector<std::pair<std::string, std::string>>;
Rows flatten(const nlohmann::json& object, const std::string& prefix = "");

// The arrays of objects inside `object`, by dotted key, in key order: each becomes a table
// of its own (one row per element).
std::vector<std::pair<std::string, const nlohmann::json*>> object_arrays(
    const nlohmann::json& object, const std::string& prefix = "");

// <table class="kv"> of the rows (escaped), or a "not recorded" note when there are none.
std::string key_value_table(const Rows& rows);

// <table class="grid"> with one row per element of `array` (objects) and one column per
// dotted scalar key any element has, in the order first seen.
std::string array_table(const nlohmann::json& array);

// A JSON value as a section body: an object as its key/value table followed by a table per
// array of objects in it, an array of objects as one table, anything else as one cell.
std::string json_tables(const nlohmann::json& value);

}  // namespace kiln::track::html
