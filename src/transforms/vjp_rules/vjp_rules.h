// Registration of the VJP rules, one function per family of primitives.
#pragma once

#include "prims/registry.h"

namespace kiln {

void register_vjp_elementwise(PrimTable& table);
void register_vjp_shape(PrimTable& table);
void register_vjp_index(PrimTable& table);
void register_vjp_reduce(PrimTable& table);
void register_vjp_contract(PrimTable& table);
void register_vjp_window(PrimTable& table);
void register_vjp_special(PrimTable& table);
void register_vjp_sort(PrimTable& table);

}  // namespace kiln
