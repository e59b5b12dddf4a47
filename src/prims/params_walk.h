// The generic walk over a params struct's fields (declared once in its fields()), and the
// printing and hashing built on it.
#pragma once

#include <cstdint>
#include <string>
#include <tuple>

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

}  // namespace kiln
