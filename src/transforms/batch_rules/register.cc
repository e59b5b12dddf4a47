// Registers every family's batching rules (called from register_all()).
#include "transforms/batch_rules/batch_rules.h"

namespace kiln {

void register_batch_rules(PrimTable& table) {
  register_batch_shape(table);
  register_batch_index(table);
  register_batch_reduce(table);
  register_batch_contract(table);
  register_batch_window(table);
  register_batch_sort(table);
  register_batch_elementwise(table);  // last: the default of every elementwise primitive
}

}  // namespace kiln
