// Registration of the batching rules (vmap), one function per family of primitives.
#pragma once

#include "prims/registry.h"

namespace kiln {

void register_batch_elementwise(PrimTable& table);
void register_batch_shape(PrimTable& table);
void register_batch_index(PrimTable& table);
void register_batch_reduce(PrimTable& table);
void register_batch_contract(PrimTable& table);
void register_batch_window(PrimTable& table);
void register_batch_sort(PrimTable& table);

}  // namespace kiln
