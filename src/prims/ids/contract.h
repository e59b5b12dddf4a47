// The ids of the contractions (prims/ids/contract.def): prim::<id>.
#pragma once

#include <cstdint>

#include "prims/prim_id.h"

namespace kiln {
namespace prim_rows::contract {
enum Row : uint16_t {
#define KILN_PRIM(id, name, arity, params, flags) id,
#include "prims/ids/contract.def"
#undef KILN_PRIM
};
}  // namespace prim_rows::contract

namespace prim {
#define KILN_PRIM(id, name, arity, params, flags) \
  inline constexpr PrimId id = prim_id(Family::kContract, prim_rows::contract::id);
#include "prims/ids/contract.def"
#undef KILN_PRIM
}  // namespace prim

}  // namespace kiln
