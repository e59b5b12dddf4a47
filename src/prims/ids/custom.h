// The ids of the primitives defined by ops (custom_vjp, pallas kernels, rematerialization)
// (prims/ids/custom.def): prim::<id>.
#pragma once

#include <cstdint>

#include "prims/prim_id.h"

namespace kiln {
namespace prim_rows::custom {
enum Row : uint16_t {
#define KILN_PRIM(id, name, arity, params, flags) id,
#include "prims/ids/custom.def"
#undef KILN_PRIM
};
}  // namespace prim_rows::custom

namespace prim {
#define KILN_PRIM(id, name, arity, params, flags) \
  inline constexpr PrimId id = prim_id(Family::kCustom, prim_rows::custom::id);
#include "prims/ids/custom.def"
#undef KILN_PRIM
}  // namespace prim

}  // namespace kiln
