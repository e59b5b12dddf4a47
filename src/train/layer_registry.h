// The layer types a program registered (kiln::train::register_layer_type, kiln/train.h),
// beside kiln's own in schema::layer_types(): the config's reader, writer and model builder
// find both through schema::find_layer_type.
#pragma once

#include <string_view>
#include <vector>

#include "train/config_schema.h"

namespace kiln::train::schema {

// nullptr when no type of that name was registered. The row stays valid for the process's
// life: registered types are never removed.
const LayerTypeRow* find_registered_layer_type(std::string_view name);
// In the order they were registered.
std::vector<std::string_view> registered_layer_type_names();

}  // namespace kiln::train::schema
