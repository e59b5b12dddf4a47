// op_table rows for the window family. (Being written.)
#include "prims/op_table.h"

namespace kiln::testing {

std::vector<OpRow> window_rows() {
  return {};
}

}  // namespace kiln::testing
