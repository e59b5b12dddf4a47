// Registers every family's fast CPU kernels.
#include "kernels/cpu/cpu_kernels.h"

namespace kiln {

void register_cpu_kernels(PrimTable& table) {
  register_cpu_elementwise(table);
  register_cpu_shape(table);
  register_cpu_reduce(table);
  register_cpu_contract(table);
  register_cpu_window(table);
  register_cpu_random(table);
  register_cpu_sort(table);
  register_cpu_index(table);
}

}  // namespace kiln
