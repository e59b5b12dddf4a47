// Abstract evaluation of the contract family. (Being written.)
#include "prims/registry.h"

namespace kiln {

void register_contract_rules(PrimTable&) {}

}  // namespace kiln
