// op_table rows for the contract family. (Being written.)
#include "prims/op_table.h"

namespace kiln::testing {

std::vector<OpRow> contract_rows() {
  return {};
}

}  // namespace kiln::testing
