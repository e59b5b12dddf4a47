// Reference kernels of the window family. (Being written.)
#include "kernels/ref/ref_kernels.h"

namespace kiln {

void register_ref_window(PrimTable&) {}

}  // namespace kiln
