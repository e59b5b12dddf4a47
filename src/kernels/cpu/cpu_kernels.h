// Registration of the fast CPU kernels. A primitive without one runs its reference kernel.
#pragma once

#include "prims/registry.h"

namespace kiln {

void register_cpu_elementwise(PrimTable& table);
void register_cpu_shape(PrimTable& table);
void register_cpu_reduce(PrimTable& table);
void register_cpu_contract(PrimTable& table);
void register_cpu_random(PrimTable& table);
void register_cpu_sort(PrimTable& table);

}  // namespace kiln
