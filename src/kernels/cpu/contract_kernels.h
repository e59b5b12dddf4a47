// The fast CPU kernels of the contract and window families, registered together by
// register_cpu_contract(): dot_general (contract.cc), conv_general_dilated (conv.cc),
// reduce_window_max/sum (pool.cc) and select_and_scatter_add (select_scatter.cc).
#pragma once

#include "prims/registry.h"

namespace kiln {

void cpu_dot_general(const KernelCall& call);
void cpu_conv_general_dilated(const KernelCall& call);
void cpu_reduce_window_max(const KernelCall& call);
void cpu_reduce_window_sum(const KernelCall& call);
void cpu_select_and_scatter_add(const KernelCall& call);  // select_scatter.cc

// Converts `count` elements of `dtype` at `in` to T (float or double), in parallel chunks.
template <typename T>
void convert_to(ComputePool& pool, DType dtype, const void* in, int64_t count, T* out);
// Converts `count` values of T to `dtype` at `out`, in parallel chunks.
template <typename T>
void convert_from(ComputePool& pool, const T* in, int64_t count, DType dtype, void* out);

}  // namespace kiln
