// Registers every family's reference kernels.
#include "kernels/ref/ref_kernels.h"

namespace kiln {

void register_ref_kernels(PrimTable& table) {
  register_ref_elementwise(table);
  register_ref_shape(table);
  register_ref_index(table);
  register_ref_reduce(table);
  register_ref_contract(table);
  register_ref_window(table);
  register_ref_random(table);
  register_ref_sort(table);
}

}  // namespace kiln
