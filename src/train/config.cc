// Reading a training config: TOML text -> TrainConfig through the schema
// (config_schema.h), then `--set section.key=value` overrides. Every error names where
// (file:line:column, or the override), the key, what was expected and what was given.
#include "train/config.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <limits>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <toml++/toml.h>

#include "base/byte_size.h"
#include "base/edit_distance.h"
#include "io/bounded_read.h"
#include "kiln/error.h"
#include "train/config_schema.h"
#include "train/precision.h"

namespace kiln::train {
namespace {

using schema::Key;
using schema::LayerField;
using schema::LayerTypeRow;
using schema::Section;
using schema::Type;
using schema::Value;

[[noreturn]] void error(std::string_view where, std::string message, std::string hint = {}) {
  fail(kUnknownSite, fmt::format("{}: {}", where, message), std::move(hint));
}

std::string position(const std::string& source, const toml::source_region& region) {
  return fmt::format("{}:{}:{}", source, region.begin.line, region.begin.column);
}

std::string_view trim(std::string_view text) {
  auto space = [](char c) { return c == ' ' || c == '\t'; };
  while (!text.empty() && space(text.front())) text.remove_prefix(1);
  while (!text.empty() && space(text.back())) text.remove_suffix(1);
  return text;
}

// What the user wrote, for "got a string ("128")".
std::string describe(const toml::node& node) {
  auto shown = [](const toml::node& value) {
    std::ostringstream out;
    out << toml::toml_formatter(value, toml::format_flags::none);
    std::string text = out.str();
    if (text.size() > 60) text = text.substr(0, 57) + "...";
    return text;
  };
  switch (node.type()) {
    case toml::node_type::string:
      return fmt::format("a string ({})", schema::format_value(node.as_string()->get()));
    case toml::node_type::integer:
      return fmt::format("an integer ({})", node.as_integer()->get());
    case toml::node_type::floating_point:
      return fmt::format("a float ({})", schema::format_value(node.as_floating_point()->get()));
    case toml::node_type::boolean:
      return fmt::format("a boolean ({})", node.as_boolean()->get());
    case toml::node_type::array:
      return fmt::format("an array ({})", shown(node));
    case toml::node_type::table:
      return "a table";
    case toml::node_type::date:
      return fmt::format("a date ({})", shown(node));
    case toml::node_type::time:
      return fmt::format("a time ({})", shown(node));
    case toml::node_type::date_time:
      return fmt::format("a date-time ({})", shown(node));
    case toml::node_type::none:
      break;
  }
  return "nothing";
}

// The node as `type`, or nothing when it is another type (an integer is a fine float).
std::optional<Value> convert(const toml::node& node, Type type) {
  switch (type) {
    case Type::kString:
      if (const auto* text = node.as_string()) return text->get();
      break;
    case Type::kInteger:
      if (const auto* integer = node.as_integer()) return integer->get();
      break;
    case Type::kFloat:
      if (const auto* real = node.as_floating_point()) return real->get();
      if (const auto* integer = node.as_integer()) return static_cast<double>(integer->get());
      break;
    case Type::kBool:
      if (const auto* flag = node.as_boolean()) return flag->get();
      break;
    case Type::kIntegerArray:
      if (const auto* array = node.as_array()) {
        std::vector<int64_t> values;
        for (const toml::node& element : *array) {
          const auto* integer = element.as_integer();
          if (!integer) return std::nullopt;
          values.push_back(integer->get());
        }
        return values;
      }
      break;
    case Type::kStringArray:
      if (const auto* array = node.as_array()) {
        std::vector<std::string> values;
        for (const toml::node& element : *array) {
          const auto* text = element.as_string();
          if (!text) return std::nullopt;
          values.push_back(text->get());
        }
        return values;
      }
      break;
    case Type::kLayers:
      break;
  }
  return std::nullopt;
}

// Reads one value into `owner` after checking its type and constraint. `name` is how the
// key is shown ("train.batch_size", "model.layers[2] (dense, line 14): features").
template <class Owner>
void read_field(const schema::Field<Owner>& field, const toml::node& node, std::string_view where,
                std::string_view name, Owner& owner) {
  std::optional<Value> value = convert(node, field.type);
  if (!value) {
    error(where, fmt::format("{}: expected {}, got {}", name, schema::type_phrase(field.type),
                             describe(node)));
  }
  const schema::Constraint& rule = field.constraint;
  if (!schema::satisfies(*value, rule)) {
    std::string shown = schema::format_value(*value);
    if (!rule.choices.empty()) {
      std::string_view guess = closest_match(std::get<std::string>(*value), rule.choices);
      error(where,
            fmt::format("{} = {} is not one of {}{}", name, shown, schema::join(rule.choices),
                        guess.empty() ? "" : fmt::format("; did you mean '{}'?", guess)));
    }
    bool scalar_number = field.type == Type::kInteger || field.type == Type::kFloat;
    error(where, fmt::format("{} = {} is {}; expected {}", name, shown,
                             scalar_number ? "out of range" : "not allowed",
                             schema::rule_text(field.type, rule)));
  }
  field.set(owner, *value);
}

// A table's entries in the order they appear in the file (toml++ keeps them sorted by
// name), so that the first mistake reported is the first one written.
std::vector<std::pair<const toml::key*, const toml::node*>> in_file_order(
    const toml::table& table) {
  std::vector<std::pair<const toml::key*, const toml::node*>> entries;
  for (const auto& [key, node] : table) entries.emplace_back(&key, &node);
  std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    const auto& x = a.first->source().begin;
    const auto& y = b.first->source().begin;
    return x.line != y.line ? x.line < y.line : x.column < y.column;
  });
  return entries;
}

// The did-you-mean for an unknown "section.key": a close key of the same section (or one
// of its aliases), the same key in another section, or a close "section.key" overall.
std::string suggest_key(std::string_view section_name, std::string_view key_name) {
  auto best_in = [&](const Section& section) -> std::string {
    std::vector<std::string_view> names;
    std::vector<const Key*> owners;
    for (const Key& key : section.keys) {
      names.push_back(key.name);
      owners.push_back(&key);
      for (std::string_view alias : key.aliases) {
        names.push_back(alias);
        owners.push_back(&key);
      }
    }
    std::string_view guess = closest_match(key_name, names);
    if (guess.empty()) return {};
    size_t at = static_cast<size_t>(std::find(names.begin(), names.end(), guess) - names.begin());
    return fmt::format("{}.{}", section.name, owners[at]->name);
  };
  if (const Section* section = schema::find_section(section_name)) {
    if (std::string guess = best_in(*section); !guess.empty()) return guess;
  }
  for (const Section& section : schema::sections()) {
    for (const Key& key : section.keys) {
      bool alias = std::find(key.aliases.begin(), key.aliases.end(), key_name) != key.aliases.end();
      if (key.name == key_name || alias) return fmt::format("{}.{}", section.name, key.name);
    }
  }
  std::vector<std::string> full_names;
  for (const Section& section : schema::sections()) {
    for (const Key& key : section.keys)
      full_names.push_back(fmt::format("{}.{}", section.name, key.name));
  }
  std::vector<std::string_view> views(full_names.begin(), full_names.end());
  std::string wanted =
      section_name.empty() ? std::string(key_name) : fmt::format("{}.{}", section_name, key_name);
  return std::string(closest_match(wanted, views));
}

std::string_view suggest_section(std::string_view name) {
  for (const auto& [alias, section] : schema::section_aliases()) {
    if (alias == name) return section;
  }
  std::vector<std::string_view> names;
  for (const Section& section : schema::sections()) names.push_back(section.name);
  return closest_match(name, names);
}

std::string keys_of(const Section& section) {
  std::vector<std::string_view> names;
  for (const Key& key : section.keys) names.push_back(key.name);
  return fmt::format("[{}] takes: {}", section.name, schema::join(names));
}

// "checkpoint_every" and the like, as other trainers name their train-state saves: in kiln
// a checkpoint is rematerialisation (kiln::checkpoint), so say what these are called here.
[[noreturn]] void checkpoint_key(std::string_view where, std::string_view full,
                                 std::string_view key_name) {
  std::string renamed = std::string(key_name);
  renamed.replace(0, std::string_view("checkpoint").size(), "savepoint");
  const Section* train = schema::find_section("train");
  std::string right = train && schema::find_key(*train, renamed)
                          ? fmt::format("train.{}", renamed)
                          : std::string("train.savepoint_every");
  error(where,
        fmt::format("unknown key '{}': train-state saves are called savepoints in kiln (a "
                    "checkpoint is rematerialisation, kiln::checkpoint); use '{}'",
                    full, right),
        "see docs/savepoints.md");
}

[[noreturn]] void unknown_key(std::string_view where, std::string_view section_name,
                              std::string_view key_name) {
  std::string full =
      section_name.empty() ? std::string(key_name) : fmt::format("{}.{}", section_name, key_name);
  if (key_name.starts_with("checkpoint")) checkpoint_key(where, full, key_name);
  std::string guess = suggest_key(section_name, key_name);
  const Section* section = schema::find_section(section_name);
  error(where,
        fmt::format("unknown key '{}'{}", full,
                    guess.empty() ? "" : fmt::format("; did you mean '{}'?", guess)),
        section ? keys_of(*section) : "");
}

std::string layer_label(const ModelConfig& model, size_t i) {
  return fmt::format("model.layers[{}] ({}, line {})", i, model.layers[i].type,
                     model.layers[i].line);
}

LayerConfig read_layer(const toml::node& node, size_t index, const std::string& source) {
  std::string where = position(source, node.source());
  const auto* table = node.as_table();
  if (!table) {
    error(where, fmt::format("model.layers[{}]: expected a table, got {}", index, describe(node)));
  }
  LayerConfig layer;
  layer.line = static_cast<int64_t>(node.source().begin.line);
  std::vector<std::string_view> type_names = schema::layer_type_names();
  const toml::node* type_node = table->get("type");
  if (!type_node) {
    error(where, fmt::format("model.layers[{}] (line {}): missing 'type'", index, layer.line),
          fmt::format("a layer's type is one of {}", schema::join(type_names)));
  }
  std::string type_where = position(source, type_node->source());
  if (!type_node->is_string()) {
    error(type_where, fmt::format("model.layers[{}] (line {}): type: expected a string, got {}",
                                  index, layer.line, describe(*type_node)));
  }
  layer.type = type_node->as_string()->get();
  const LayerTypeRow* type = schema::find_layer_type(layer.type);
  if (!type) {
    std::string_view guess = closest_match(layer.type, type_names);
    error(type_where,
          fmt::format("model.layers[{}] (line {}): unknown layer type '{}'{}", index, layer.line,
                      layer.type, guess.empty() ? "" : fmt::format("; did you mean '{}'?", guess)),
          fmt::format("a layer's type is one of {}; a program of your own may add more "
                      "(kiln::train::register_layer_type, docs/training.md)",
                      schema::join(type_names)));
  }
  std::string label = fmt::format("model.layers[{}] ({}, line {})", index, layer.type, layer.line);
  std::string takes = type->fields().empty()
                          ? fmt::format("{} takes no fields", type->name)
                          : fmt::format("{} takes: {}", type->name, schema::join(type->fields()));
  for (const auto& [key, value] : in_file_order(*table)) {
    if (key->str() == "type") continue;
    const LayerField* field = schema::find_layer_field(key->str());
    if (!field || !type->takes(key->str())) {
      std::string_view guess = closest_match(key->str(), type->fields());
      error(
          position(source, key->source()),
          fmt::format("{}: unknown field '{}' for a {} layer; {}{}", label, key->str(), type->name,
                      guess.empty() ? "" : fmt::format("did you mean '{}'? ", guess), takes));
    }
    read_field(*field, *value, position(source, value->source()),
               fmt::format("{}: {}", label, key->str()), layer);
  }
  for (std::string_view required : type->required) {
    if (!table->contains(required)) {
      error(where, fmt::format("{}: missing field '{}'; {}", label, required, takes));
    }
  }
  return layer;
}

void read_layers(const toml::node& node, const std::string& source, TrainConfig& config) {
  std::string where = position(source, node.source());
  const auto* array = node.as_array();
  if (!array) {
    error(where, fmt::format("model.layers: expected an array of tables ([[model.layers]]), got {}",
                             describe(node)));
  }
  if (array->empty()) {
    error(where, "model.layers is empty; a model needs at least one layer",
          "add [[model.layers]] tables, e.g. [[model.layers]] type = \"dense\" features = 10");
  }
  config.model.layers.clear();
  for (size_t i = 0; i < array->size(); ++i) {
    config.model.layers.push_back(read_layer(*array->get(i), i, source));
  }
}

void read_section(const Section& section, const toml::key& name, const toml::node& node,
                  const std::string& source, TrainConfig& config) {
  const auto* table = node.as_table();
  if (!table) {
    error(position(source, name.source()),
          fmt::format("{}: expected a table (a [{}] section), got {}", section.name, section.name,
                      describe(node)));
  }
  for (const auto& [key, value] : in_file_order(*table)) {
    const Key* spec = schema::find_key(section, key->str());
    // A table inside the section that is a section of its own: [data.features].
    std::string nested_name = fmt::format("{}.{}", section.name, key->str());
    if (const Section* nested = schema::find_section(nested_name); !spec && nested) {
      read_section(*nested, *key, *value, source, config);
      continue;
    }
    if (!spec) unknown_key(position(source, key->source()), section.name, key->str());
    if (spec->type == Type::kLayers) {
      read_layers(*value, source, config);
      continue;
    }
    read_field(*spec, *value, position(source, value->source()),
               fmt::format("{}.{}", section.name, spec->name), config);
  }
}

// The override's value as the right-hand side of `x = value`; a bare word (or anything
// else that is not TOML) is a string, and so is any value given to a string key.
toml::table parse_override_value(std::string_view text, Type type) {
  toml::table holder;
  bool parsed = false;
  try {
    holder = toml::parse(fmt::format("x = {}", text), std::string_view("--set"));
    parsed = holder.size() == 1 && holder.contains("x");
  } catch (const toml::parse_error&) {
  }
  if (!parsed || (type == Type::kString && !holder["x"].is_string())) {
    holder = toml::table{};
    holder.insert("x", std::string(text));
  }
  return holder;
}

// --set model.layers[N].field=value: one field of one of the file's layers, checked as the
// file's own would be.
void apply_layer_override(std::string_view path, std::string_view value, const std::string& where,
                          TrainConfig& config) {
  constexpr std::string_view kPrefix = "model.layers[";
  const std::string usage = "for example --set model.layers[0].remat=save_nothing";
  size_t close = path.find(']');
  size_t index = 0;
  std::string_view digits = path.substr(kPrefix.size(), close - std::min(close, kPrefix.size()));
  auto [end, failure] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
  if (close == std::string_view::npos || close + 1 >= path.size() || path[close + 1] != '.' ||
      digits.empty() || failure != std::errc() || end != digits.data() + digits.size()) {
    error(where, "expected model.layers[N].field=value, N a layer's position from 0", usage);
  }
  const std::vector<LayerConfig>& layers = config.model.layers;
  if (index >= layers.size()) {
    error(where,
          fmt::format("model.layers[{}]: the config has {} layer{}", index, layers.size(),
                      layers.size() == 1 ? "" : "s"),
          layers.empty() ? "" : fmt::format("positions run from 0 to {}", layers.size() - 1));
  }
  LayerConfig& layer = config.model.layers[index];
  std::string_view name = path.substr(close + 2);
  const LayerTypeRow* type = schema::find_layer_type(layer.type);
  const LayerField* field = schema::find_layer_field(name);
  std::string label = layer_label(config.model, index);
  if (!field || !type || !type->takes(name)) {
    error(where, fmt::format("{}: unknown field '{}' for a {} layer", label, name, layer.type),
          type ? fmt::format("{} takes: {}", type->name, schema::join(type->fields())) : "");
  }
  toml::table holder = parse_override_value(value, field->type);
  read_field(*field, *holder.get("x"), where, fmt::format("{}: {}", label, name), layer);
}

void apply_override(const std::string& text, TrainConfig& config) {
  std::string where = fmt::format("--set {}", text);
  size_t equals = text.find('=');
  if (equals == std::string::npos) {
    error(where, "expected section.key=value", "for example --set optim.lr=3e-4");
  }
  std::string_view path = trim(std::string_view(text).substr(0, equals));
  std::string_view value = trim(std::string_view(text).substr(equals + 1));
  // The last dot: data.features.min is key min of section data.features.
  size_t dot = path.rfind('.');
  std::string_view section_name = dot == std::string_view::npos ? "" : path.substr(0, dot);
  std::string_view key_name = dot == std::string_view::npos ? path : path.substr(dot + 1);
  if (path.starts_with("model.layers[")) return apply_layer_override(path, value, where, config);
  if (path.starts_with("model.layers")) {
    error(where, "model.layers cannot be replaced from the command line",
          "override one field of one layer (--set model.layers[0].remat=save_nothing), or edit "
          "the [[model.layers]] tables in the config file");
  }
  const Section* section = schema::find_section(section_name);
  const Key* key = section ? schema::find_key(*section, key_name) : nullptr;
  if (!key) unknown_key(where, section_name, key_name);
  toml::table holder = parse_override_value(value, key->type);
  read_field(*key, *holder.get("x"), where, fmt::format("{}.{}", section->name, key->name), config);
}

// Rules that relate keys to each other, checked once the file and the overrides are in.
void check_schedule(const OptimConfig& optim, const std::string& source_name) {
  const std::vector<int64_t>& boundaries = optim.boundaries;
  for (size_t i = 1; i < boundaries.size(); ++i) {
    if (boundaries[i] > boundaries[i - 1]) continue;
    error(source_name,
          fmt::format("optim.boundaries = [{}] must increase: boundaries[{}] = {} does not come "
                      "after boundaries[{}] = {}",
                      fmt::join(boundaries, ", "), i, boundaries[i], i - 1, boundaries[i - 1]),
          "list the steps at which the learning rate drops in order, each once");
  }
  if (optim.schedule == "piecewise" && boundaries.empty()) {
    error(source_name,
          "optim.schedule = \"piecewise\" needs optim.boundaries, the steps at which the "
          "learning rate is multiplied by optim.decay_rate",
          "e.g. boundaries = [2000, 4000] and decay_rate = 0.1");
  }
}

// The model's kind and its description agree; a GPT-2's sizes fit each other and the data.
void check_model(const TrainConfig& config, const std::string& source_name) {
  const ModelConfig& model = config.model;
  if (model.kind == "sequential" && model.layers.empty()) {
    error(source_name, "the config has no model: add [[model.layers]] tables",
          "see examples/fashion_mnist_mlp.toml, or set model.kind = \"gpt2\"");
  }
  bool text_data = config.data.dataset == "text" || config.data.dataset == "tokens";
  if (text_data && config.data.context == 0) {
    error(source_name,
          fmt::format("data.dataset = \"{}\" needs data.context, the tokens per example",
                      config.data.dataset),
          "set data.context, e.g. 64");
  }
  if (model.kind != "gpt2") return;
  if (!model.layers.empty()) {
    error(source_name,
          fmt::format("model.kind = \"gpt2\" takes its sizes from [model.gpt2], but the config "
                      "also has {} [[model.layers]] tables",
                      model.layers.size()),
          "remove the [[model.layers]] tables, or set model.kind = \"sequential\"");
  }
  const Gpt2ModelConfig& gpt2 = model.gpt2;
  if (gpt2.channels % gpt2.heads != 0) {
    error(source_name,
          fmt::format("model.gpt2.channels = {} does not split into model.gpt2.heads = {} heads",
                      gpt2.channels, gpt2.heads),
          "choose channels divisible by heads");
  }
  if (gpt2.padded_vocab_size != 0 && gpt2.padded_vocab_size < gpt2.vocab_size) {
    error(source_name,
          fmt::format("model.gpt2.padded_vocab_size = {} is smaller than vocab_size = {}",
                      gpt2.padded_vocab_size, gpt2.vocab_size),
          "set it to 0 (rounded up to a multiple of 128) or to at least vocab_size");
  }
  if (!text_data) {
    error(source_name,
          fmt::format("model.kind = \"gpt2\" reads token ids, but data.dataset = \"{}\"",
                      config.data.dataset),
          "set data.dataset = \"text\" or \"tokens\" (docs/transformer.md)");
  }
  if (config.data.context > gpt2.max_context) {
    error(source_name,
          fmt::format("data.context = {} is longer than the model's model.gpt2.max_context = {}",
                      config.data.context, gpt2.max_context),
          "shorten data.context or raise model.gpt2.max_context");
  }
  if (config.mesh.model > 1) {
    error(source_name, "mesh.model > 1: a GPT-2 has no tensor-parallel layers yet",
          "set mesh.model = 1 (data parallelism with mesh.data works)");
  }
}

void check_last_batch(const TrainLoopConfig& train, const std::string& source_name) {
  if (train.drop_remainder && train.pad_remainder) {
    error(source_name,
          "train.drop_remainder and train.pad_remainder are both true: an epoch's last, smaller "
          "batch can be left out or padded, not both",
          "keep one (pad_remainder trains on every example)");
  }
}

bool is_activation(const LayerConfig& layer) {
  const schema::LayerTypeRow* type = schema::find_layer_type(layer.type);
  return type != nullptr && type->elementwise;
}

// Tensor parallelism pairs layers as Megatron does: a column-split dense layer, activations
// (which work on its block of the features), then a row-split dense layer that sums the
// blocks' products back into whole features.
void check_tensor_parallel(const TrainConfig& config, const std::string& source_name) {
  const ModelConfig& model = config.model;
  bool any_split = false;
  // A column layer still waiting for its row layer (npos: none). Not a std::optional:
  // GCC 12 warns that one read behind a check may be uninitialized.
  constexpr size_t npos = std::numeric_limits<size_t>::max();
  size_t open_column = npos;
  for (size_t i = 0; i < model.layers.size(); ++i) {
    const LayerConfig& layer = model.layers[i];
    if (layer.parallel == "column") {
      any_split = true;
      if (open_column != npos) {
        error(source_name,
              fmt::format("{}: parallel = \"column\" follows the column-split {} before a "
                          "row-split layer took its output",
                          layer_label(model, i), layer_label(model, open_column)),
              "put a dense layer with parallel = \"row\" between them");
      }
      if (layer.features % config.mesh.model != 0) {
        error(source_name,
              fmt::format("{}: {} features do not split over mesh.model = {} devices",
                          layer_label(model, i), layer.features, config.mesh.model),
              "choose features divisible by mesh.model");
      }
      open_column = i;
    } else if (layer.parallel == "row") {
      any_split = true;
      if (open_column == npos) {
        error(source_name,
              fmt::format("{}: parallel = \"row\" needs a column-split dense layer before it "
                          "(with only activations between): its input is a block of features",
                          layer_label(model, i)),
              "set parallel = \"column\" on the dense layer before it, or remove parallel");
      }
      open_column = npos;
    } else if (open_column != npos && !is_activation(layer)) {
      error(source_name,
            fmt::format("{} sits between the column-split {} and its row-split layer, where "
                        "each device holds only a block of the features; only activations can",
                        layer_label(model, i), layer_label(model, open_column)),
            "move it after the row-split layer or before the column-split one");
    }
  }
  if (open_column != npos) {
    error(source_name,
          fmt::format("{}: parallel = \"column\" has no row-split dense layer after it",
                      layer_label(model, open_column)),
          "set parallel = \"row\" on a later dense layer (only activations between)");
  }
  if (config.mesh.model > 1 && !any_split) {
    error(source_name,
          fmt::format("mesh.model = {} but no layer is split over it", config.mesh.model),
          "set parallel = \"column\" and \"row\" on a pair of dense layers, or mesh.model = 1");
  }
}

// Each layer with remat starts a block of remat_span layers; blocks stay inside the model
// and apart (nn::Sequential's remat spans). remat_span without remat is ignored.
void check_remat_spans(const ModelConfig& model, const std::string& source_name) {
  size_t block_start = 0, block_end = 0;  // the previous block: [block_start, block_end)
  for (size_t i = 0; i < model.layers.size(); ++i) {
    const LayerConfig& layer = model.layers[i];
    // A span without remat is no block (and is not written): so that a comparison can
    // vary remat alone (kiln bench cost --set model.layers[0].remat_span=3 --compare
    // model.layers[0].remat=none,save_nothing).
    if (layer.remat == "none") continue;
    if (i < block_end) {
      error(source_name,
            fmt::format("{}: remat starts a block inside the block of {} (its remat_span = {} "
                        "reaches layer {})",
                        layer_label(model, i), layer_label(model, block_start),
                        block_end - block_start, block_end - 1),
            "shorten that block's remat_span, or remove remat here");
    }
    auto span = static_cast<size_t>(layer.remat_span);
    if (i + span > model.layers.size()) {
      error(source_name,
            fmt::format("{}: remat_span = {} reaches past the model's last layer ({} layers from "
                        "this one)",
                        layer_label(model, i), layer.remat_span, model.layers.size() - i),
            fmt::format("at most {} here", model.layers.size() - i));
    }
    block_start = i;
    block_end = i + span;
  }
}

// The device count is checked when the run starts (it is the machine's, not the file's).
void check_mesh(const TrainConfig& config, const std::string& source_name) {
  const MeshConfig& mesh = config.mesh;
  check_tensor_parallel(config, source_name);
  if (mesh.data == 0) {
    if (mesh.shard_params) {
      error(source_name, "mesh.shard_params = true needs a mesh: mesh.data is 0",
            "set mesh.data to the number of devices to split over");
    }
    if (mesh.model > 1) {
      error(source_name, fmt::format("mesh.model = {} needs a mesh: mesh.data is 0", mesh.model),
            "set mesh.data = 1 for tensor parallelism alone, or more for data x tensor");
    }
    return;
  }
  if (mesh.shard_params && mesh.model > 1) {
    error(source_name,
          fmt::format("mesh.shard_params = true with mesh.model = {}: FSDP over the data axis "
                      "of a tensor-parallel mesh is not built yet",
                      mesh.model),
          "set mesh.shard_params = false, or mesh.model = 1");
  }
  if (mesh.shard_params && config.optim.clip_global_norm > 0) {
    error(source_name,
          fmt::format("mesh.shard_params = true with optim.clip_global_norm = {}: the global "
                      "norm of gradients split over devices is not supported yet",
                      config.optim.clip_global_norm),
          "set optim.clip_global_norm = 0, or mesh.shard_params = false (replicated params "
          "clip as on one device)");
  }
  if (mesh.chunks % mesh.data != 0) {
    error(source_name,
          fmt::format("mesh.chunks = {} is not a multiple of mesh.data = {}: every device takes "
                      "the same number of chunks",
                      mesh.chunks, mesh.data),
          fmt::format("e.g. mesh.chunks = {}",
                      mesh.data * ((mesh.chunks + mesh.data - 1) / mesh.data)));
  }
  if (config.train.batch_size % mesh.chunks != 0) {
    error(source_name,
          fmt::format("train.batch_size = {} does not split into mesh.chunks = {} equal chunks",
                      config.train.batch_size, mesh.chunks),
          "choose a batch size that is a multiple of mesh.chunks");
  }
}

// An update of accumulate x batch_size rows must stay within the batch sizes kiln takes.
void check_accumulation(const TrainConfig& config, const std::string& source_name) {
  const TrainLoopConfig& train = config.train;
  constexpr int64_t kMaxRows = int64_t{1} << 20;
  if (train.accumulate > 1 && train.batch_size > kMaxRows / train.accumulate) {
    error(source_name,
          fmt::format("train.accumulate = {} micro-batches of train.batch_size = {} make updates "
                      "of {} rows, more than the {} a step takes",
                      train.accumulate, train.batch_size, train.accumulate * train.batch_size,
                      kMaxRows),
          "lower train.accumulate or train.batch_size");
  }
}

// A budget must be a size, and the plans it chooses among run on one device.
void check_memory_budget(const TrainConfig& config, const std::string& source_name) {
  const std::string& budget = config.train.memory_budget;
  if (budget.empty()) return;
  std::optional<int64_t> bytes = parse_byte_size(budget);
  if (!bytes || *bytes == 0) {
    error(source_name, fmt::format("train.memory_budget = \"{}\" is not a size in bytes", budget),
          "write a number and a unit, such as \"2GiB\", \"1.5 GB\" or \"800MiB\" (KiB, MiB, "
          "GiB, TiB: powers of 1024; kB, MB, GB, TB: powers of 1000), or bytes alone");
  }
  if (config.mesh.data > 0) {
    error(source_name,
          fmt::format("train.memory_budget with mesh.data = {}: the budget chooses among plans "
                      "of a step on one device; a mesh's step is not planned that way yet",
                      config.mesh.data),
          "leave out [mesh] (or set mesh.data = 0) to train under a budget, or set "
          "train.accumulate yourself on a mesh");
  }
}

// f16 without loss scaling: gradients below f16's smallest normal (6e-5) would vanish.
void check_precision(const TrainConfig& config, const std::string& source_name) {
  if (!computes_in(config.model, "f16") || resolved_loss_scale(config) != "none") return;
  error(source_name,
        std::string(config.model.compute_dtype == "f16" ? "model.compute_dtype"
                                                        : "a layer's compute_dtype") +
            " = \"f16\" with train.loss_scale = \"none\": without loss scaling, "
            "gradients below f16's smallest normal number (6.1e-5) underflow to zero",
        "set train.loss_scale = \"dynamic\" (the default for f16), or use \"bf16\" (f32's "
        "range with 8 bits of mantissa; docs/precision.md)");
}

// DP-SGD's step takes per-example gradients on one device or a data-parallel mesh: what
// mixes examples (batch norm), splits the parameters (FSDP, tensor parallelism), adds
// micro-batches (accumulation) or scales the loss is refused by name.
void check_privacy(const TrainConfig& config, const std::string& source_name) {
  if (!config.privacy.enabled) return;
  auto refuse = [&](const std::string& what, const std::string& hint) {
    error(source_name, "privacy.enabled = true with " + what, hint);
  };
  if (config.model.kind != "sequential") {
    refuse(fmt::format("model.kind = \"{}\": private training covers sequential models "
                       "([[model.layers]]) for now",
                       config.model.kind),
           "train a [[model.layers]] model, or set privacy.enabled = false");
  }
  for (size_t i = 0; i < config.model.layers.size(); ++i) {
    if (config.model.layers[i].type == "batch_norm") {
      refuse(fmt::format("{}: batch norm mixes the examples of a batch, so an example's own "
                         "gradient is not defined",
                         layer_label(config.model, i)),
             "use layer_norm (or group statistics per example) in a private model");
    }
  }
  if (config.mesh.shard_params || config.mesh.model > 1) {
    refuse(config.mesh.shard_params
               ? std::string("mesh.shard_params = true: the noise of a gradient split over the "
                             "devices is not built")
               : fmt::format("mesh.model = {}: private training is data parallel only",
                             config.mesh.model),
           "set mesh.shard_params = false and mesh.model = 1 (mesh.data splits the batch)");
  }
  if (config.train.accumulate > 1) {
    refuse(fmt::format("train.accumulate = {}: a private step already computes its per-example "
                       "gradients in chunks",
                       config.train.accumulate),
           "set train.accumulate = 1, and privacy.examples_per_chunk for the memory");
  }
  if (config.telemetry.every > 0) {
    refuse(fmt::format("telemetry.every = {}: per-layer statistics of the training batches "
                       "would be published without noise, outside the privacy guarantee",
                       config.telemetry.every),
           "set telemetry.every = 0 for a private run");
  }
  if (!config.train.memory_budget.empty()) {
    refuse(
        "train.memory_budget: a private step's memory is set by privacy.examples_per_chunk "
        "(the per-example gradients held at once), which the budget does not plan",
        "leave train.memory_budget empty and lower privacy.examples_per_chunk to save memory");
  }
  if (config.train.drop_remainder) {
    refuse("train.drop_remainder = true: Poisson-sampled batches have no remainder to drop",
           "set train.drop_remainder = false");
  }
  if (resolved_loss_scale(config) != "none") {
    refuse(fmt::format("loss scaling (train.loss_scale resolves to \"{}\"): each example's "
                       "gradient is clipped before the sum, which a scaled loss would change",
                       resolved_loss_scale(config)),
           "compute in f32 or bf16 with train.loss_scale = \"none\"");
  }
}

}  // namespace

std::string resolved_loss_scale(const TrainConfig& config) {
  const std::string& mode = config.train.loss_scale;
  if (mode != "auto") return mode;
  return computes_in(config.model, "f16") ? "dynamic" : "none";
}

TrainConfig update_config(const TrainConfig& config) {
  if (config.train.accumulate <= 1) return config;
  TrainConfig update = config;
  const int64_t k = config.train.accumulate;
  update.train.batch_size = k * config.train.batch_size;
  if (config.mesh.data == 0) {
    // No mesh: the step splits each batch into its K micro-batches itself (the arithmetic
    // of a mesh of one device with K chunks, without the mesh).
    update.train.accumulate = k;
    return update;
  }
  update.mesh.chunks = k * config.mesh.chunks;
  update.train.accumulate = 1;  // resolved: the steps see one batch per update, in chunks
  return update;
}

TrainConfig parse_config(const std::string& text, const std::string& source_name,
                         const std::vector<std::string>& overrides) {
  toml::table root;
  try {
    root = toml::parse(text, std::string_view(source_name));
  } catch (const toml::parse_error& e) {
    error(position(source_name, e.source()), std::string(e.description()));
  }
  TrainConfig config;
  config.source = source_name;
  for (const auto& [name, node] : in_file_order(root)) {
    const Section* section = schema::find_section(name->str());
    if (section) {
      read_section(*section, *name, *node, source_name, config);
      continue;
    }
    std::string where = position(source_name, name->source());
    if (!node->is_table()) unknown_key(where, "", name->str());
    std::string_view guess = suggest_section(name->str());
    std::vector<std::string_view> names;
    for (const Section& known : schema::sections()) names.push_back(known.name);
    error(where,
          fmt::format("unknown section '{}'{}", name->str(),
                      guess.empty() ? "" : fmt::format("; did you mean '{}'?", guess)),
          fmt::format("the sections are {}", schema::join(names)));
  }
  for (const std::string& override_text : overrides) apply_override(override_text, config);
  check_model(config, source_name);
  check_remat_spans(config.model, source_name);
  check_schedule(config.optim, source_name);
  check_last_batch(config.train, source_name);
  check_mesh(config, source_name);
  check_accumulation(config, source_name);
  check_memory_budget(config, source_name);
  check_precision(config, source_name);
  check_privacy(config, source_name);
  return config;
}

TrainConfig load_config(const std::filesystem::path& path,
                        const std::vector<std::string>& overrides) {
  // Before opening it: opening a FIFO for reading waits for a writer, maybe forever.
  std::error_code code;
  std::filesystem::file_status status = std::filesystem::status(path, code);
  if (std::filesystem::exists(status) && !std::filesystem::is_regular_file(status)) {
    std::string_view kind =
        std::filesystem::is_directory(status) ? "a directory"
        : std::filesystem::is_fifo(status)    ? "a FIFO"
        : std::filesystem::is_character_file(status) || std::filesystem::is_block_file(status)
            ? "a device"
            : "not a regular file";
    fail(kUnknownSite, fmt::format("cannot read config '{}': it is {}", path.string(), kind),
         "a config is a TOML file, e.g. examples/fashion_mnist_mlp.toml");
  }
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    bool exists = std::filesystem::exists(path, code);
    fail(kUnknownSite,
         fmt::format("cannot read config '{}': {}", path.string(),
                     exists ? "permission denied or unreadable" : "no such file"),
         exists ? ""
                : "the examples are examples/fashion_mnist_mlp.toml and "
                  "examples/fashion_mnist_cnn.toml");
  }
  // Read at most one byte past the limit: a config is a few kilobytes, and /dev/zero or a
  // data file given by mistake must not fill the memory.
  std::string text(kMaxConfigBytes + 1, '\0');
  file.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (file.bad()) fail(kUnknownSite, fmt::format("cannot read config '{}'", path.string()));
  text.resize(static_cast<size_t>(file.gcount()));
  if (text.size() > kMaxConfigBytes) {
    fail(kUnknownSite,
         fmt::format("cannot read config '{}': it is larger than {} bytes (1 MiB), the limit for "
                     "a config file",
                     path.string(), kMaxConfigBytes),
         "is this the TOML config? A config is a few kilobytes of text");
  }
  // The name as text that JSON can hold: run.json and `data validate --json` record it, and
  // a name that is not UTF-8 made nlohmann throw an error that named nothing.
  return parse_config(text, io::printable_path(path), overrides);
}

}  // namespace kiln::train
