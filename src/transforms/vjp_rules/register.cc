// Registers every family's VJP rules (called from register_all()).
#include "transforms/vjp_rules/vjp_rules.h"

namespace kiln {

void register_vjp_rules(PrimTable& table) {
  register_vjp_elementwise(table);
  register_vjp_shape(table);
  register_vjp_index(table);
  register_vjp_reduce(table);
  register_vjp_contract(table);
  register_vjp_window(table);
  register_vjp_special(table);
  register_vjp_sort(table);
}

}  // namespace kiln
