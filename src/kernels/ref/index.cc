// Reference kernels of the index family. (Being written.)
#include "kernels/ref/ref_kernels.h"

namespace kiln {

void register_ref_index(PrimTable&) {}

}  // namespace kiln
