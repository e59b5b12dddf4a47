// Writing a training config from the schema: to_toml (the resolved config saved in each
// run directory, which parse_config reads back to an equal config) and schema_markdown
// (the reference in docs/training.md, checked against this by a test).
#include <fmt/format.h>

#include "train/config.h"
#include "train/config_schema.h"

namespace kiln::train {
namespace {

using schema::Key;
using schema::LayerField;
using schema::LayerTypeRow;
using schema::Section;
using schema::Type;

std::string without_backticks(std::string_view text) {
  std::string plain;
  for (char c : text) {
    if (c != '`') plain += c;
  }
  return plain;
}

// "key = value", padded so that the help comments line up.
std::string line_with_help(std::string_view name, const std::string& value, std::string_view help) {
  std::string assignment = fmt::format("{} = {}", name, value);
  if (help.empty()) return assignment + "\n";
  return fmt::format("{:<34}  # {}\n", assignment, without_backticks(help));
}

std::string layer_toml(const LayerConfig& layer) {
  std::string text =
      fmt::format("\n[[model.layers]]\ntype = {}\n", schema::format_value(layer.type));
  const LayerTypeRow* type = schema::find_layer_type(layer.type);
  if (!type) return text;
  for (const LayerField& field : schema::layer_fields()) {
    if (!type->takes(field.name)) continue;
    schema::Value value = field.get(layer);
    // An empty array is an optional field left unset (strides: the type's default).
    const auto* array = std::get_if<std::vector<int64_t>>(&value);
    if (array && array->empty()) continue;
    // Written only when split, so that an unsplit model's text, and the run identity made
    // from it, stayed what they were before tensor parallelism.
    if (field.name == "parallel" && layer.parallel == "none") continue;
    // Likewise a layer that computes in the model's dtype.
    if (field.name == "compute_dtype" && layer.compute_dtype.empty()) continue;
    // And a layer that is not rematerialized.
    if ((field.name == "remat" || field.name == "remat_span") && layer.remat == "none") continue;
    text += fmt::format("{} = {}\n", field.name, schema::format_value(value));
  }
  return text;
}

std::string markdown_rule(Type type, const schema::Constraint& constraint) {
  if (constraint.choices.empty()) return schema::rule_text(type, constraint, /*article=*/false);
  std::vector<std::string> quoted;
  for (std::string_view choice : constraint.choices) quoted.push_back(fmt::format("`{}`", choice));
  return fmt::format("one of {}", fmt::join(quoted, ", "));
}

template <class Owner>
std::string markdown_default(const schema::Field<Owner>& field) {
  if (!field.default_doc.empty()) return std::string(field.default_doc);
  return fmt::format("`{}`", schema::format_value(field.get(Owner{})));
}

std::string code_list(const std::vector<std::string_view>& names) {
  std::vector<std::string> quoted;
  for (std::string_view name : names) quoted.push_back(fmt::format("`{}`", name));
  return fmt::format("{}", fmt::join(quoted, ", "));
}

}  // namespace

namespace {

// identity_only: the sections and keys that make the run identity, without the comments
// (the help text), so that rewording a key's help changes no run's identity.
std::string toml_of(const TrainConfig& config, bool identity_only) {
  std::string text = identity_only
                         ? ""
                         : "# kiln training config, resolved: every key, defaults and overrides "
                           "included.\n";
  for (const Section& section : schema::sections()) {
    if (identity_only && !section.in_identity) continue;
    if (section.written && !section.written(config)) continue;
    text += identity_only ? fmt::format("\n[{}]\n", section.name)
                          : fmt::format("\n# {}\n[{}]\n", section.help, section.name);
    for (const Key& key : section.keys) {
      if (key.type == Type::kLayers) continue;  // written after the section's keys
      if (key.written && !key.written(config)) continue;
      const auto& get = identity_only && key.identity_get ? key.identity_get : key.get;
      text += line_with_help(key.name, schema::format_value(get(config)),
                             identity_only ? std::string_view() : key.help);
    }
    if (section.name == "model") {
      for (const LayerConfig& layer : config.model.layers) text += layer_toml(layer);
    }
  }
  return text;
}

}  // namespace

std::string to_toml(const TrainConfig& config) {
  return toml_of(config, false);
}

std::string identity_toml(const TrainConfig& config) {
  return toml_of(config, true);
}

std::string schema_markdown() {
  std::string text =
      "Generated from the schema (src/train/config_schema.cc); a test keeps this section equal "
      "to it. Every key is optional except `model.layers` (unless `model.kind` is `gpt2`). An "
      "integer is accepted where a float "
      "is expected. `--set section.key=value` overrides a key after the file is read (the value "
      "is read as TOML; a bare word is a string).\n";
  for (const Section& section : schema::sections()) {
    text += fmt::format("\n### `[{}]`\n\n{}\n\n", section.name, section.help);
    text += "| key | type | default | meaning |\n| --- | --- | --- | --- |\n";
    for (const Key& key : section.keys) {
      std::string type =
          key.type == Type::kLayers ? "array of tables" : markdown_rule(key.type, key.constraint);
      std::string default_text =
          key.type == Type::kLayers ? std::string(key.default_doc) : markdown_default(key);
      text += fmt::format("| `{}` | {} | {} | {} |\n", key.name, type, default_text, key.help);
    }
  }
  text +=
      "\n### `[[model.layers]]`\n\nEach layer is a table with a `type` and only the fields that "
      "type takes (any other field is an error). Layers apply in order; inputs are NHWC "
      "images.\n\n| type | required fields | optional fields | what it does |\n"
      "| --- | --- | --- | --- |\n";
  for (const LayerTypeRow& type : schema::layer_types()) {
    text += fmt::format("| `{}` | {} | {} | {} |\n", type.name, code_list(type.required),
                        code_list(type.optional), type.help);
  }
  text += "\n| field | type | default | meaning |\n| --- | --- | --- | --- |\n";
  for (const LayerField& field : schema::layer_fields()) {
    text += fmt::format("| `{}` | {} | {} | {} |\n", field.name,
                        markdown_rule(field.type, field.constraint), markdown_default(field),
                        field.help);
  }
  return text;
}

}  // namespace kiln::train
