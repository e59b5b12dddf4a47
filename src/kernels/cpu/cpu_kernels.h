// Registration of the fast CPU kernels, one function per family (each in the family's
// file). A primitive without one runs its reference kernel, and so does a call that a
// fast kernel does not support (PrimDef::cpu_supports).
#pragma once

#include "prims/registry.h"

namespace kiln {

void register_cpu_elementwise(PrimTable& table);
void register_cpu_shape(PrimTable& table);
void register_cpu_reduce(PrimTable& table);
void register_cpu_contract(PrimTable& table);
void register_cpu_window(PrimTable& table);
void register_cpu_random(PrimTable& table);
void register_cpu_sort(PrimTable& table);
void register_cpu_index(PrimTable& table);

}  // namespace kiln
