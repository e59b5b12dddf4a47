// The ids of the element-type conversions (prims/ids/convert.def): prim::<id>.
#pragma once

#include <cstdint>

#include "prims/prim_id.h"

namespace kiln {
namespace prim_rows::convert {
enum Row : uint16_t {
#define KILN_PRIM(id, name, arity, params, flags) id,
#include "prims/ids/convert.def"
#undef KILN_PRIM
};
}  // namespace prim_rows::convert

namespace prim {
#define KILN_PRIM(id, name, arity, params, flags) \
  inline constexpr PrimId id = prim_id(Family::kConvert, prim_rows::convert::id);
#include "prims/ids/convert.def"
#undef KILN_PRIM
}  // namespace prim

}  // namespace kiln
