// The ids of sort (prims/ids/sort.def): prim::<id>.
#pragma once

#include <cstdint>

#include "prims/prim_id.h"

namespace kiln {
namespace prim_rows::sort {
enum Row : uint16_t {
#define KILN_PRIM(id, name, arity, params, flags) id,
#include "prims/ids/sort.def"
#undef KILN_PRIM
};
}  // namespace prim_rows::sort

namespace prim {
#define KILN_PRIM(id, name, arity, params, flags) \
  inline constexpr PrimId id = prim_id(Family::kSort, prim_rows::sort::id);
#include "prims/ids/sort.def"
#undef KILN_PRIM
}  // namespace prim

}  // namespace kiln
