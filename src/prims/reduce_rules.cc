// Abstract evaluation of the reduce family. (Being written.)
#include "prims/registry.h"

namespace kiln {

void register_reduce_rules(PrimTable&) {}

}  // namespace kiln
