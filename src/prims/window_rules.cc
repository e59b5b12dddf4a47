// Abstract evaluation of the window family. (Being written.)
#include "prims/registry.h"

namespace kiln {

void register_window_rules(PrimTable&) {}

}  // namespace kiln
