// The ids of the window primitives (prims/ids/window.def): prim::<id>.
#pragma once

#include <cstdint>

#include "prims/prim_id.h"

namespace kiln {
namespace prim_rows::window {
enum Row : uint16_t {
#define KILN_PRIM(id, name, arity, params, flags) id,
#include "prims/ids/window.def"
#undef KILN_PRIM
};
}  // namespace prim_rows::window

namespace prim {
#define KILN_PRIM(id, name, arity, params, flags) \
  inline constexpr PrimId id = prim_id(Family::kWindow, prim_rows::window::id);
#include "prims/ids/window.def"
#undef KILN_PRIM
}  // namespace prim

}  // namespace kiln
