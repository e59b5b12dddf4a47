// The ids of the random-bits primitive (prims/ids/random.def): prim::<id>.
#pragma once

#include <cstdint>

#include "prims/prim_id.h"

namespace kiln {
namespace prim_rows::random {
enum Row : uint16_t {
#define KILN_PRIM(id, name, arity, params, flags) id,
#include "prims/ids/random.def"
#undef KILN_PRIM
};
}  // namespace prim_rows::random

namespace prim {
#define KILN_PRIM(id, name, arity, params, flags) \
  inline constexpr PrimId id = prim_id(Family::kRandom, prim_rows::random::id);
#include "prims/ids/random.def"
#undef KILN_PRIM
}  // namespace prim

}  // namespace kiln
