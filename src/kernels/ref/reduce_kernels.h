// The reference kernels of the reduce family, visible to the fast CPU kernels
// (kernels/cpu/reduce*.cc) so that they can hand layouts and dtypes they do not speed up
// back to the plain definition.
#pragma once

#include "prims/registry.h"

namespace kiln::ref {

void reduce_sum(const KernelCall& call);
void reduce_max(const KernelCall& call);
void reduce_min(const KernelCall& call);

}  // namespace kiln::ref
