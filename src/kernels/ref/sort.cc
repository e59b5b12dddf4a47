// Reference kernel of sort: each 1-D line along the sort dimension gets an index
// permutation from std::stable_sort under the lexicographic order of the key operands
// (kernels/sort_order.h), which then reorders every operand.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>

#include "kernels/ref/ref_kernels.h"
#include "kernels/sort_order.h"
#include "prims/ids/sort.h"

namespace kiln {
namespace {

void ref_sort(const KernelCall& call) {
  const auto& params = std::get<SortParams>(call.params);
  sorting::Lines lines = sorting::lines_of(call.inputs[0].aval->shape, params.dimension);
  std::vector<int64_t> order(static_cast<size_t>(lines.length));
  for (int64_t line = 0; line < lines.count(); ++line) {
    std::iota(order.begin(), order.end(), int64_t{0});
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      for (int64_t key = 0; key < params.num_keys; ++key) {
        const KernelInput& keys = call.inputs[static_cast<size_t>(key)];
        int c =
            sorting::compare_at(keys.aval->dtype, keys.data, lines.at(line, a), lines.at(line, b));
        if (c != 0) return c < 0;
      }
      return false;
    });
    for (size_t operand = 0; operand < call.inputs.size(); ++operand) {
      size_t width = static_cast<size_t>(dtype_size(call.inputs[operand].aval->dtype));
      const auto* in = static_cast<const std::byte*>(call.inputs[operand].data);
      auto* out = static_cast<std::byte*>(call.outputs[operand].data);
      for (int64_t k = 0; k < lines.length; ++k) {
        std::memcpy(out + lines.at(line, k) * width,
                    in + lines.at(line, order[static_cast<size_t>(k)]) * width, width);
      }
    }
  }
}

}  // namespace

void register_ref_sort(PrimTable& table) {
  table[prim::sort].ref_kernel = ref_sort;
}

}  // namespace kiln
