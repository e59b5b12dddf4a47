// A kernel's failure as a compiled program reports it: as eager mode does, naming the
// primitive that failed and the user's line that called it (the kernel itself knows
// neither), whether the primitive ran as its own step or inside a fused group.
#pragma once

#include <fmt/format.h>

#include "kiln/error.h"
#include "prims/registry.h"

namespace kiln::detail {

inline Error primitive_failed(PrimId prim, CallSite site, const Error& error) {
  return Error(fmt::format("{} failed while running: {}", prim_name(prim), error.message()),
               error.hint(), site);
}

}  // namespace kiln::detail
