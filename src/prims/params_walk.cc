// The generic walk over params fields: printing, parsing and hashing for every params
// struct.
#include "prims/params_walk.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <xxhash.h>

#include "base/check.h"
#include "kiln/error.h"

namespace kiln {
namespace {

std::string format_value(int64_t value) {
  return std::to_string(value);
}
std::string format_value(const std::string& value) {
  return fmt::format("\"{}\"", value);
}
std::string format_value(bool value) {
  return value ? "true" : "false";
}
std::string format_value(DType value) {
  return std::string(dtype_name(value));
}
std::string format_value(IndexMode value) {
  return std::string(index_mode_name(value));
}
std::string format_value(const Dims& value) {
  return fmt::format("({})", fmt::join(value, ","));
}
std::string format_value(const Shape& value) {
  return format_value(value.dims());
}
std::string format_value(const std::optional<DType>& value) {
  return value ? format_value(*value) : "none";
}
std::string format_value(const ProgramRef& value) {
  return format_sub_program(value);
}
std::string format_value(const std::vector<ProgramRef>& value) {
  std::vector<std::string> parts;
  for (const ProgramRef& ref : value) parts.push_back(format_sub_program(ref));
  return fmt::format("({})", fmt::join(parts, ", "));
}

void read_value(ParamValueReader& reader, int64_t& value) {
  value = reader.read_int();
}
void read_value(ParamValueReader& reader, bool& value) {
  value = reader.read_bool();
}
void read_value(ParamValueReader& reader, DType& value) {
  value = reader.read_dtype();
}
void read_value(ParamValueReader& reader, IndexMode& value) {
  value = reader.read_index_mode();
}
void read_value(ParamValueReader& reader, Dims& value) {
  value = reader.read_dims();
}
void read_value(ParamValueReader& reader, std::string& value) {
  value = reader.read_string();
}
void read_value(ParamValueReader& reader, Shape& value) {
  value = Shape(reader.read_dims());
}
void read_value(ParamValueReader& reader, std::optional<DType>& value) {
  value = reader.read_optional_dtype();
}
void read_value(ParamValueReader& reader, ProgramRef& value) {
  value = reader.read_program();
}
void read_value(ParamValueReader& reader, std::vector<ProgramRef>& value) {
  value = reader.read_programs();
}

template <size_t... I>
Params default_params_impl(size_t index, std::index_sequence<I...>) {
  static const Params kDefaults[] = {Params(std::in_place_index<I>)...};
  return kDefaults[index];
}

}  // namespace

std::optional<IndexMode> index_mode_from_name(std::string_view name) {
  for (IndexMode mode : {IndexMode::kError, IndexMode::kClip, IndexMode::kFill}) {
    if (index_mode_name(mode) == name) return mode;
  }
  return std::nullopt;
}

Params default_params(size_t index) {
  KILN_CHECK(index < std::variant_size_v<Params>, "params index {} out of range", index);
  return default_params_impl(index, std::make_index_sequence<std::variant_size_v<Params>>());
}

std::vector<std::string_view> param_field_names(size_t index) {
  std::vector<std::string_view> names;
  std::visit(
      [&](const auto& p) {
        for_each_field(p, [&](std::string_view name, const auto&) { names.push_back(name); });
      },
      default_params(index));
  return names;
}

bool read_param_field(Params& params, std::string_view name, ParamValueReader& reader) {
  return std::visit(
      [&](auto& p) {
        bool found = false;
        // for_each_field hands out const values; a field is written through the member
        // pointer of the same fields() entry.
        auto read_if_named = [&](const auto& field) {
          if (found || field.name != name) return;
          read_value(reader, p.*(field.member));
          found = true;
        };
        std::apply([&](const auto&... field) { (read_if_named(field), ...); },
                   std::remove_cvref_t<decltype(p)>::fields());
        return found;
      },
      params);
}

std::string_view index_mode_name(IndexMode mode) {
  switch (mode) {
    case IndexMode::kError:
      return "error";
    case IndexMode::kClip:
      return "clip";
    case IndexMode::kFill:
      return "fill";
  }
  return "?";
}

std::string format_params(const Params& params) {
  return std::visit(
      [](const auto& p) {
        std::vector<std::string> parts;
        for_each_field(p, [&](std::string_view name, const auto& value) {
          parts.push_back(fmt::format("{}={}", name, format_value(value)));
        });
        return fmt::format("{}", fmt::join(parts, " "));
      },
      params);
}

uint64_t hash_params(const Params& params) {
  std::string text = fmt::format("{}:{}", params.index(), format_params(params));
  return XXH3_64bits(text.data(), text.size());
}

}  // namespace kiln
