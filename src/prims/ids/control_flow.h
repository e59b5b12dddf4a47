// The ids of the control-flow primitives (prims/ids/control_flow.def): prim::<id>.
#pragma once

#include <cstdint>

#include "prims/prim_id.h"

namespace kiln {
namespace prim_rows::control_flow {
enum Row : uint16_t {
#define KILN_PRIM(id, name, arity, params, flags) id,
#include "prims/ids/control_flow.def"
#undef KILN_PRIM
};
}  // namespace prim_rows::control_flow

namespace prim {
#define KILN_PRIM(id, name, arity, params, flags) \
  inline constexpr PrimId id = prim_id(Family::kControlFlow, prim_rows::control_flow::id);
#include "prims/ids/control_flow.def"
#undef KILN_PRIM
}  // namespace prim

}  // namespace kiln
