// register_layer_type and the table it fills. Each registered type keeps its own strings,
// and its schema row (views into them) sits beside them in a deque, whose elements never
// move, so the rows find_layer_type hands out stay valid while more types are registered.
#include "train/layer_registry.h"

#include <algorithm>
#include <deque>
#include <mutex>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "kiln/train.h"
#include "nn/module_impl.h"

namespace kiln::train {
namespace {

struct Registered {
  LayerType type;  // the strings the row views
  schema::LayerTypeRow row;
};

struct Registry {
  std::mutex mutex;
  std::deque<Registered> types;
};

Registry& registry() {
  static auto* instance = new Registry();  // never destroyed: rows may be read at exit
  return *instance;
}

// The LayerConfig fields a registered type may read: every layer field but dense's
// tensor-parallel split, which the trainer's parallel steps know only for dense.
std::vector<std::string_view> readable_fields() {
  std::vector<std::string_view> names;
  for (const schema::LayerField& field : schema::layer_fields()) {
    if (field.name != "parallel") names.push_back(field.name);
  }
  return names;
}

void check_fields(const LayerType& type, CallSite site) {
  std::vector<std::string_view> readable = readable_fields();
  std::vector<std::string_view> seen;
  auto check = [&](const std::string& field) {
    if (std::find(readable.begin(), readable.end(), field) == readable.end()) {
      fail(site, fmt::format("register_layer_type '{}': unknown field '{}'", type.name, field),
           fmt::format("a layer type reads fields of kiln::train::LayerConfig: {}",
                       schema::join(readable)));
    }
    if (std::find(seen.begin(), seen.end(), field) != seen.end()) {
      fail(site,
           fmt::format("register_layer_type '{}': field '{}' is listed twice", type.name, field),
           "a field is either required or optional");
    }
    seen.push_back(field);
  };
  for (const std::string& field : type.required) check(field);
  for (const std::string& field : type.optional) check(field);
}

schema::LayerTypeRow row_viewing(const LayerType& type) {
  schema::LayerTypeRow row;
  row.name = type.name;
  row.help = type.help;
  row.required.assign(type.required.begin(), type.required.end());
  row.optional.assign(type.optional.begin(), type.optional.end());
  row.build = type.build;
  return row;
}

}  // namespace

void register_layer_type(LayerType type, CallSite site) {
  // The rule a layer's kind follows: the type names the params' paths ("residual_mlp_3").
  if (!nn::detail::valid_kind(type.name)) {
    fail(site,
         fmt::format("register_layer_type: name '{}' must be lower-case letters, digits and '_'",
                     type.name),
         "the name is what a config's [[model.layers]] type says, e.g. \"residual_mlp\"");
  }
  if (!type.build) {
    fail(site, fmt::format("register_layer_type '{}': build is an empty function", type.name),
         "build makes the nn::Module for one [[model.layers]] table");
  }
  check_fields(type, site);
  if (type.help.empty()) type.help = "registered by this program";
  const auto& own = schema::layer_types();
  bool kilns = std::any_of(own.begin(), own.end(),
                           [&](const schema::LayerTypeRow& row) { return row.name == type.name; });
  Registry& table = registry();
  std::lock_guard lock(table.mutex);
  bool earlier = std::any_of(table.types.begin(), table.types.end(),
                             [&](const Registered& entry) { return entry.row.name == type.name; });
  if (kilns || earlier) {
    fail(site,
         fmt::format("register_layer_type: '{}' is already a layer type{}", type.name,
                     kilns ? " of kiln's" : " (registered earlier)"),
         "choose another name");
  }
  Registered& added = table.types.emplace_back(Registered{std::move(type), {}});
  added.row = row_viewing(added.type);
}

namespace schema {

const LayerTypeRow* find_registered_layer_type(std::string_view name) {
  Registry& table = registry();
  std::lock_guard lock(table.mutex);
  for (const Registered& entry : table.types) {
    if (entry.row.name == name) return &entry.row;
  }
  return nullptr;
}

std::vector<std::string_view> registered_layer_type_names() {
  Registry& table = registry();
  std::lock_guard lock(table.mutex);
  std::vector<std::string_view> names;
  for (const Registered& entry : table.types) names.push_back(entry.row.name);
  return names;
}

}  // namespace schema
}  // namespace kiln::train
