// The ids of the reductions and scans (prims/ids/reduce.def): prim::<id>.
#pragma once

#include <cstdint>

#include "prims/prim_id.h"

namespace kiln {
namespace prim_rows::reduce {
enum Row : uint16_t {
#define KILN_PRIM(id, name, arity, params, flags) id,
#include "prims/ids/reduce.def"
#undef KILN_PRIM
};
}  // namespace prim_rows::reduce

namespace prim {
#define KILN_PRIM(id, name, arity, params, flags) \
  inline constexpr PrimId id = prim_id(Family::kReduce, prim_rows::reduce::id);
#include "prims/ids/reduce.def"
#undef KILN_PRIM
}  // namespace prim

}  // namespace kiln
