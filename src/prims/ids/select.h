// The ids of select (prims/ids/select.def): prim::<id>.
#pragma once

#include <cstdint>

#include "prims/prim_id.h"

namespace kiln {
namespace prim_rows::select {
enum Row : uint16_t {
#define KILN_PRIM(id, name, arity, params, flags) id,
#include "prims/ids/select.def"
#undef KILN_PRIM
};
}  // namespace prim_rows::select

namespace prim {
#define KILN_PRIM(id, name, arity, params, flags) \
  inline constexpr PrimId id = prim_id(Family::kSelect, prim_rows::select::id);
#include "prims/ids/select.def"
#undef KILN_PRIM
}  // namespace prim

}  // namespace kiln
