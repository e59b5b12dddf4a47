// op_table rows for the shape family. (Being written.)
#include "prims/op_table.h"

namespace kiln::testing {

std::vector<OpRow> shape_rows() {
  return {};
}

}  // namespace kiln::testing
