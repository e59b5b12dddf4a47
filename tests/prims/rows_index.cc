// op_table rows for the index family. (Being written.)
#include "prims/op_table.h"

namespace kiln::testing {

std::vector<OpRow> index_rows() {
  return {};
}

}  // namespace kiln::testing
