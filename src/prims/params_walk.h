// The generic walk over a params struct's fields (declared once in its fields()), and the
// printing, parsing and hashing built on it. The program text parser (ir/parser.h) reads
// params through read_param_field.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "prims/params.h"

namespace kiln {

// Calls fn(name, value) for each field of `params`, in declaration order.
template <typename P, typename Fn>
void for_each_field(const P& params, Fn&& fn) {
  std::apply([&](const auto&... field) { (fn(field.name, params.*(field.member)), ...); },
             P::fields());
}

// "axes=(0,1)"; fields separated by spaces; empty for NoParams.
std::string format_params(const Params& params);
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
