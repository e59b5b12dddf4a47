// The generic walk over a params struct's fields (declared once in its fields()), and the
// printing, parsing and hashing built on it. The program text parser (ir/parser.h) reads
// params through read_param_field.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

#include "prims/params.h"

namespace kiln {

// Calls fn(name, value) for each field of `params`, in declaration order.
template <typename P, typename Fn>
void for_each_field(const P& params, Fn&& fn) {
  std::apply([&](const auto&... field) { (fn(field.name, params.*(field.member)), ...); },
             P::fields());
}

// Calls fn(label, ref) for each sub-program a params value holds (control flow): label
// is the field name, with the position for lists ("body", "branches[1]").
template <typename Fn>
void for_each_sub_program(const Params& params, Fn&& fn) {
  std::visit(
      [&](const auto& p) {
        for_each_field(p, [&](std::string_view name, const auto& value) {
          using Value = std::decay_t<decltype(value)>;
          if constexpr (std::is_same_v<Value, ProgramRef>) {
            fn(std::string(name), value);
          } else if constexpr (std::is_same_v<Value, std::vector<ProgramRef>>) {
            for (size_t i = 0; i < value.size(); ++i) {
              fn(std::string(name) + "[" + std::to_string(i) + "]", value[i]);
            }
          }
        });
      },
      params);
}

// "axes=(0,1)"; fields separated by spaces; empty for NoParams.
std::string format_params(const Params& params);
// How a sub-program param prints: the IR printer's text (ir/printer.cc), with the print
// options of the program being printed when there is one; continuation lines are indented
// by the printer that places the equation.
std::string format_sub_program(const ProgramRef& ref);

// A stable hash of the params (kind and every field); the jit cache key uses it.
uint64_t hash_params(const Params& params);

// ----- parsing ----------------------------------------------------------------------------
// What a parser supplies to read one field value of each kind from its input (raising its
// own error, with the position, when the text there is not such a value). Shapes are read
// as dims.
class ParamValueReader {
 public:
  virtual ~ParamValueReader() = default;
  virtual int64_t read_int() = 0;
  virtual bool read_bool() = 0;
  virtual DType read_dtype() = 0;
  virtual std::optional<DType> read_optional_dtype() = 0;
  virtual IndexMode read_index_mode() = 0;
  virtual Dims read_dims() = 0;
  virtual std::string read_string() = 0;
  // A nested program "{ lambda ... }" (control-flow sub-programs), and a parenthesised,
  // comma-separated list of them.
  virtual ProgramRef read_program() = 0;
  virtual std::vector<ProgramRef> read_programs() = 0;
};

// Alternative `index` of Params, every field at its default.
Params default_params(size_t index);
// The field names of alternative `index`, in declaration (and printing) order.
std::vector<std::string_view> param_field_names(size_t index);
// Reads field `name` of `params` with `reader`; false (reading nothing) when the params
// have no such field.
bool read_param_field(Params& params, std::string_view name, ParamValueReader& reader);

std::optional<IndexMode> index_mode_from_name(std::string_view name);

}  // namespace kiln
