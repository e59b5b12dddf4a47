// The training config's schema: every section, key and layer field declared once, with
// its type, default (read from the structs' default member initialisers in config.h),
// allowed values and help. Parsing (config.cc), writing and the docs reference
// (config_write.cc) all walk these tables, so they cannot drift apart.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "kiln/nn/module.h"
#include "train/config.h"

namespace kiln::train::schema {

enum class Type { kString, kInteger, kFloat, kBool, kIntegerArray, kStringArray, kLayers };

// A key's value once read (integers where a float is expected are already converted).
using Value = std::variant<std::string, int64_t, double, bool, std::vector<int64_t>,
                           std::vector<std::string>>;

// What a value must satisfy beyond its type. Numeric bounds apply to every entry of an
// integer array.
struct Constraint {
  std::vector<std::string_view> choices;  // an enumeration; empty: any string
  std::optional<double> min;
  std::optional<double> max;
  bool min_exclusive = false;
  bool max_exclusive = false;
  size_t length = 0;       // integer arrays: exact number of entries (0: any)
  bool non_empty = false;  // strings
  // Strings used as one path component: letters, digits, '.', '_' and '-' only (so no '/',
  // no control characters), not "." or "..", at most kMaxNameLength characters.
  bool dir_name = false;
  // Strings used as a path: printable characters only (no NUL, newline or other control
  // character), at most kMaxPathLength bytes.
  bool path = false;
  // Floats: a value other than 0 must be at least this (learning rates and the like are
  // computed in f32, where anything much smaller is 0 or a subnormal).
  std::optional<double> min_nonzero;
  // Strings: "" is allowed too (an optional path or name).
  bool may_be_empty = false;
  // Floats: -inf and inf are allowed (a bound that is not set).
  bool allow_infinite = false;
};

inline constexpr size_t kMaxNameLength = 100;
inline constexpr size_t kMaxPathLength = 4096;

// A field of `Owner`: TrainConfig for the sections' keys, LayerConfig for layer fields.
template <class Owner>
struct Field {
  std::string_view name;
  Type type = Type::kString;
  std::string_view help;
  Constraint constraint;
  // Other names people write for this key (PyTorch's, optax's), for the did-you-mean.
  std::vector<std::string_view> aliases;
  // Shown in the docs instead of the struct's default when that depends on context.
  std::string_view default_doc;
  std::function<Value(const Owner&)> get;
  // What the run identity (identity_toml) records for the key, when that is less than its
  // value: mesh.data only says whether the step is data parallel, since every mesh size
  // gives the same bits (so a run may resume on another). Unset: `get`.
  std::function<Value(const Owner&)> identity_get;
  std::function<void(Owner&, const Value&)> set;
  // Whether the resolved config (to_toml, identity_toml) writes the key; unset: always.
  // Keys added after runs existed are left out where they change nothing, so that those
  // runs' config text and identity stay what they were (the loss-scale keys without loss
  // scaling). The parser reads an absent key as its default, so the text still reads back
  // to an equal config.
  std::function<bool(const Owner&)> written;
};
using Key = Field<TrainConfig>;
using LayerField = Field<LayerConfig>;

// A section's name may hold a dot: [data.features] is a table inside [data], read and
// written as its own section.
struct Section {
  std::string_view name;
  std::string_view help;
  std::vector<Key> keys;  // model has one, `layers`, of type kLayers (no get/set)
  // False for sections that do not change what the run computes (identity_toml leaves
  // them out).
  bool in_identity = true;
  // Whether the resolved config (to_toml, identity_toml) writes the section; unset: always.
  // A section added after runs existed is left out while it is at its defaults, so that
  // those runs keep their config text and identity ([privacy]).
  std::function<bool(const TrainConfig&)> written = {};
};

struct LayerTypeRow {
  std::string_view name;
  std::string_view help;
  std::vector<std::string_view> required;
  std::vector<std::string_view> optional;
  // The layer for one [[model.layers]] table of this type (its fields already checked).
  std::function<nn::Module(const LayerConfig& layer)> build;
  // Works on each element alone (an activation): it may sit between a column- and a
  // row-split dense layer, on a device's block of the features.
  bool elementwise = false;
  bool takes(std::string_view field) const;
  std::vector<std::string_view> fields() const;  // required, then optional
};

const std::vector<Section>& sections();
const std::vector<LayerField>& layer_fields();  // every field but `type`, in docs order
// kiln's own layer types (those the docs list); find_layer_type and layer_type_names also
// know the types this process registered (kiln::train::register_layer_type).
const std::vector<LayerTypeRow>& layer_types();
std::vector<std::string_view> layer_type_names();
// Other names people write for a section (optimizer -> optim), for the did-you-mean.
const std::vector<std::pair<std::string_view, std::string_view>>& section_aliases();

const Section* find_section(std::string_view name);
const Key* find_key(const Section& section, std::string_view name);
const LayerField* find_layer_field(std::string_view name);
const LayerTypeRow* find_layer_type(std::string_view name);

// "an integer", "a float", ... as in "expected an integer".
std::string_view type_phrase(Type type);
// The rule a value must follow, e.g. "an integer >= 1", "a float in [0, 1)", "one of valid,
// same". `article` false drops the leading a/an (for the docs' type column).
std::string rule_text(Type type, const Constraint& constraint, bool article = true);
bool satisfies(const Value& value, const Constraint& constraint);
// The value as TOML: strings quoted and escaped, floats always with a '.' or exponent.
std::string format_value(const Value& value);
std::string join(const std::vector<std::string_view>& words, std::string_view separator = ", ");

}  // namespace kiln::train::schema
