// Fast CPU kernel of scatter_add, the gradient of take / take_along_axis (an embedding's
// backward pass). The reference sums into a double copy of the whole operand; this kernel
// touches only the rows that receive updates. It groups the update rows by the operand row
// they add into, keeping index order within a group, and sums each group in the same
// accumulator as the reference (double for floats, rounded once): the same additions in the
// same order, so the same bits. Groups are independent, so they run in parallel in chunks
// fixed by the sizes, and the bits never depend on the thread count.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/shape_copy.h"
#include "kernels/index_rows.h"
#include "prims/ids/index.h"

namespace kiln {
namespace {

// Update rows whose operand row is the same: positions [begin, end) of `order`.
struct RowGroup {
  int64_t batch = 0;
  int64_t target = 0;  // the operand row along the axis
  size_t begin = 0, end = 0;
};

// Groups each batch's update positions by target row, index order kept within a group;
// positions dropped by mode fill (target -1) are left out.
std::vector<RowGroup> group_rows(const IndexGeometry& g, const std::vector<int64_t>& targets,
                                 std::vector<int64_t>& order) {
  std::vector<RowGroup> groups;
  order.clear();
  for (int64_t b = 0; b < g.batch; ++b) {
    size_t first = order.size();
    for (int64_t j = 0; j < g.n; ++j) {
      if (targets[static_cast<size_t>(b * g.n + j)] >= 0) order.push_back(b * g.n + j);
    }
    auto by_target = [&](int64_t x, int64_t y) {
      return targets[static_cast<size_t>(x)] < targets[static_cast<size_t>(y)];
    };
    std::stable_sort(order.begin() + static_cast<std::ptrdiff_t>(first), order.end(), by_target);
    for (size_t i = first; i < order.size();) {
      size_t end = i;
      int64_t target = targets[static_cast<size_t>(order[i])];
      while (end < order.size() && targets[static_cast<size_t>(order[end])] == target) ++end;
      groups.push_back({b, target, i, end});
      i = end;
    }
  }
  return groups;
}

// Below this many accumulated elements per chunk, a thread hand-off costs more than it saves.
constexpr int64_t kMinScatterChunk = 16384;

void cpu_scatter_add(const KernelCall& call) {
  const auto& p = std::get<ScatterParams>(call.params);
  const KernelInput& operand = call.inputs[0];
  const KernelInput& indices = call.inputs[1];
  const KernelInput& updates = call.inputs[2];
  IndexGeometry g = index_geometry(operand.aval->shape, indices.aval->shape, p.axis, p.batch_dims);
  std::vector<int64_t> targets =
      resolved_indices(indices, p.axis, g.axis_size, p.mode, IndexUse::kScatter);
  std::vector<int64_t> order;
  std::vector<RowGroup> groups = group_rows(g, targets, order);

  // Rows nobody updates are the operand's (nothing to copy when the output is written over
  // the operand's buffer); each updated row is rewritten whole below, from the operand.
  int64_t width = dtype_size(operand.aval->dtype);
  if (call.outputs[0].data != operand.data) {
    const auto* from = static_cast<const std::byte*>(operand.data);
    auto* to = static_cast<std::byte*>(call.outputs[0].data);
    shape_kernels::parallel_range(call.pool, operand.aval->num_elements() * width,
                                  shape_kernels::kMinChunkBytes, [&](int64_t begin, int64_t end) {
                                    std::memcpy(to + begin, from + begin,
                                                static_cast<size_t>(end - begin));
                                  });
  }

  visit_dtype(operand.aval->dtype, [&](auto tag) {
    using S = storage_t<decltype(tag)::value>;
    using A = ScatterAccumulator<S>;
    const S* base = static_cast<const S*>(operand.data);
    const S* upd = static_cast<const S*>(updates.data);
    S* out = static_cast<S*>(call.outputs[0].data);
    // One task per (group, pre): an operand row of `post` elements and its updates.
    int64_t tasks = static_cast<int64_t>(groups.size()) * g.pre;
    int64_t work = tasks * std::max<int64_t>(g.post, 1);
    int64_t chunks = std::max<int64_t>(chunk_count(work, kMinScatterChunk), 1);
    auto run = [&](int64_t chunk) {
      std::vector<A> acc(static_cast<size_t>(g.post));
      for (int64_t t = tasks * chunk / chunks; t < tasks * (chunk + 1) / chunks; ++t) {
        const RowGroup& group = groups[static_cast<size_t>(t / g.pre)];
        int64_t pre = t % g.pre;
        int64_t row = ((group.batch * g.pre + pre) * g.axis_size + group.target) * g.post;
        for (int64_t q = 0; q < g.post; ++q) acc[q] = to_scatter_accumulator(base[row + q]);
        for (size_t i = group.begin; i < group.end; ++i) {
          int64_t j = order[i] - group.batch * g.n;
          const S* source = upd + ((group.batch * g.pre + pre) * g.n + j) * g.post;
          for (int64_t q = 0; q < g.post; ++q) acc[q] += to_scatter_accumulator(source[q]);
        }
        for (int64_t q = 0; q < g.post; ++q) out[row + q] = convert_element<S>(acc[q]);
      }
    };
    if (chunks == 1) {
      run(0);
    } else {
      call.pool.parallel_for(chunks, run);
    }
  });
}

}  // namespace

void register_cpu_index(PrimTable& table) {
  table[prim::scatter_add].cpu_kernel = cpu_scatter_add;
}

}  // namespace kiln
