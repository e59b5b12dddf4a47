// The ids of elementwise unary primitives (prims/ids/unary.def): prim::<id>.
#pragma once

#include <cstdint>

#include "prims/prim_id.h"

namespace kiln {
namespace prim_rows::unary {
enum Row : uint16_t {
#define KILN_PRIM(id, name, arity, params, flags) id,
#include "prims/ids/unary.def"
#undef KILN_PRIM
};
}  // namespace prim_rows::unary

namespace prim {
#define KILN_PRIM(id, name, arity, params, flags) \
  inline constexpr PrimId id = prim_id(Family::kUnary, prim_rows::unary::id);
#include "prims/ids/unary.def"
#undef KILN_PRIM
}  // namespace prim

}  // namespace kiln
