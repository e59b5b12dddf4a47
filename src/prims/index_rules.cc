// Abstract evaluation of the index family. (Being written.)
#include "prims/registry.h"

namespace kiln {

void register_index_rules(PrimTable&) {}

}  // namespace kiln
