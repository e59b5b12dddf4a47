// User-facing sorting ops, all phrased with the sort primitive: sort, lax.sort-style
// multi-operand sort, sort_key_val and argsort (a sort of (x, iota)).
#include <fmt/format.h>

#include "kiln/device.h"
#include "ops/op_util.h"
#include "prims/ids/sort.h"

namespace kiln {

std::vector<Array> sort(std::span<const Array> operands, int64_t axis, int64_t num_keys,
                        CallSite site) {
  if (operands.empty()) fail(site, "sort: needs at least one operand");
  for (const Array& operand : operands) {
    if (!operand.defined()) fail(site, "sort: an operand is an empty Array (default-constructed)");
  }
  int64_t rank = operands[0].rank();
  if (rank == 0) {
    fail(site, fmt::format("sort: cannot sort a rank-0 array ({})", operands[0].aval().to_string()),
         "reshape to rank 1 first, e.g. reshape(x, {1})");
  }
  int64_t dimension = user_axis("sort", axis, rank, site);
  return bind(prim::sort, operands, SortParams{dimension, num_keys}, site);
}

Array sort(const Array& x, int64_t axis, CallSite site) {
  return sort(std::span<const Array>(&x, 1), axis, 1, site)[0];
}

std::pair<Array, Array> sort_key_val(const Array& keys, const Array& values, int64_t axis,
                                     CallSite site) {
  Array operands[] = {keys, values};
  std::vector<Array> sorted = sort(operands, axis, 1, site);
  return {sorted[0], sorted[1]};
}

Array argsort(const Array& x, int64_t axis, DType index_dtype, CallSite site) {
  if (!is_integer(index_dtype)) {
    fail(site,
         fmt::format("argsort: index_dtype must be an integer dtype, got {}",
                     dtype_name(index_dtype)),
         "use DType::i32 or DType::i64");
  }
  if (!x.defined()) fail(site, "argsort: the operand is an empty Array (default-constructed)");
  if (x.rank() == 0) {
    fail(site, fmt::format("argsort: cannot sort a rank-0 array ({})", x.aval().to_string()),
         "reshape to rank 1 first, e.g. reshape(x, {1})");
  }
  int64_t dimension = user_axis("argsort", axis, x.rank(), site);
  Array indices = iota(x.shape(), index_dtype, dimension, device_of(x), site);
  return sort_key_val(x, indices, dimension, site).second;
}

}  // namespace kiln
