// op_table rows for the reduce family. (Being written.)
#include "prims/op_table.h"

namespace kiln::testing {

std::vector<OpRow> reduce_rows() {
  return {};
}

}  // namespace kiln::testing
