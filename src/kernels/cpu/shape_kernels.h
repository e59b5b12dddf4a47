// The layout family's fast CPU kernels that live in their own files; shape.cc registers
// them with the rest in register_cpu_shape().
#pragma once

#include "prims/registry.h"

namespace kiln::shape_kernels {

// Cache-blocked transpose of any rank (shape_transpose.cc).
void cpu_transpose(const KernelCall& call);

}  // namespace kiln::shape_kernels
