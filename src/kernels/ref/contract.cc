// Reference kernels of the contract family. (Being written.)
#include "kernels/ref/ref_kernels.h"

namespace kiln {

void register_ref_contract(PrimTable&) {}

}  // namespace kiln
