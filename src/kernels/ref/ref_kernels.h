// Registration of the reference kernels, one function per family. Reference kernels are
// plain loops written for clarity: they define what each primitive computes, and every
// fast kernel is tested against them.
#pragma once

#include "prims/registry.h"

namespace kiln {

void register_ref_elementwise(PrimTable& table);
void register_ref_shape(PrimTable& table);
void register_ref_index(PrimTable& table);
void register_ref_reduce(PrimTable& table);
void register_ref_contract(PrimTable& table);
void register_ref_window(PrimTable& table);
void register_ref_random(PrimTable& table);
void register_ref_sort(PrimTable& table);

}  // namespace kiln
