// The fast CPU kernels of the contract family, registered by register_cpu_contract():
// dot_general (contract.cc) and conv_general_dilated (conv.cc).
#pragma once

#include "prims/registry.h"

namespace kiln {

void cpu_dot_general(const KernelCall& call);
void cpu_conv_general_dilated(const KernelCall& call);

// Converts `count` elements of `dtype` at `in` to T (float or double), in parallel chunks.
template <typename T>
void convert_to(ComputePool& pool, DType dtype, const void* in, int64_t count, T* out);
// Converts `count` values of T to `dtype` at `out`, in parallel chunks.
template <typename T>
void convert_from(ComputePool& pool, const T* in, int64_t count, DType dtype, void* out);

}  // namespace kiln
