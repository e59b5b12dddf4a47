// Fast CPU kernels for reduce_sum, reduce_max and reduce_min on floating dtypes. The
// operand is viewed as [outer, reduced, inner] (size-1 axes dropped, neighbouring axes of
// one kind merged): inner == 1 is a row reduction (contiguous runs, e.g. f32[128,10] over
// axis 1 or a full sum), inner > 1 a column reduction (e.g. the bias gradient, f32[128,512]
// over axis 0). Other layouts, integer dtypes and empty operands go to the reference kernel.
//
// Determinism: every split (row blocks, column chunks, row groups) is computed from the
// sizes alone, each piece runs a fixed sequence of operations (the vector loops of
// reduce_simd.cc fix it independently of the vector width), and partial results are
// combined in a fixed order, so the bits never depend on the number of threads. Sums
// accumulate in double (the loops are memory bound, so the wider accumulator costs
// nothing) and round once.
#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/element_convert.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/reduce_simd.h"
#include "kernels/ref/reduce_kernels.h"
#include "prims/ids/reduce.h"

namespace kiln {
namespace {

constexpr auto kSimdLanes = static_cast<int64_t>(simd::kReduceLanes);
// Below this many elements a reduction runs as one piece (threads would cost more).
constexpr int64_t kSerialElements = 1 << 15;
// A row longer than this is split into blocks of about this length.
constexpr int64_t kRowBlock = 1 << 15;
// Work per task when whole rows are grouped together.
constexpr int64_t kRowGroupElements = 1 << 14;
// Columns per task in a column reduction, and the minimum rows in a row block there.
constexpr int64_t kColumnChunk = 256;
constexpr int64_t kMinRowsPerBlock = 64;
// Column reductions split the reduced axis when there are fewer tasks than this.
constexpr int64_t kTargetTasks = 64;

// The [outer, reduced, inner] view; `ok` is false for other layouts.
struct ReduceView {
  bool ok = false;
  int64_t outer = 1, reduced = 1, inner = 1;
};

ReduceView view_of(const Shape& shape, const Dims& axes) {
  ReduceView view;
  // 0 = before the reduced run, 1 = inside it, 2 = after it.
  int phase = 0;
  for (int64_t axis = 0; axis < shape.rank(); ++axis) {
    int64_t size = shape[axis];
    if (size == 1) continue;
    bool is_reduced = std::find(axes.begin(), axes.end(), axis) != axes.end();
    if (is_reduced) {
      if (phase == 2) return view;  // a second reduced run
      phase = 1;
      view.reduced *= size;
    } else {
      if (phase == 1) phase = 2;
      (phase == 0 ? view.outer : view.inner) *= size;
    }
  }
  view.ok = true;
  return view;
}

// 16-bit floats widen to float (bf16 is the top half of a binary32).
template <typename S>
inline float widen_half(S value) {
  if constexpr (std::is_same_v<S, bf16>) {
    return std::bit_cast<float>(static_cast<uint32_t>(value.bits) << 16);
  } else {
    return value.to_float();
  }
}

// Every op accumulates in double (exact for max/min, the wide accumulator for sums).
struct SumOp {
  static constexpr simd::ReduceKind kKind = simd::ReduceKind::kSum;
  static constexpr double identity() { return 0.0; }
  static double step(double acc, double x) { return acc + x; }
};

// NaN-propagating: once the accumulator is NaN no comparison replaces it.
template <bool is_max>
struct ExtremeOp {
  static constexpr simd::ReduceKind kKind =
      is_max ? simd::ReduceKind::kMax : simd::ReduceKind::kMin;
  static constexpr double identity() {
    return is_max ? -std::numeric_limits<double>::infinity()
                  : std::numeric_limits<double>::infinity();
  }
  static double step(double acc, double x) {
    if (std::isnan(acc)) return acc;
    if (std::isnan(x)) return x;
    return (is_max ? x > acc : x < acc) ? x : acc;
  }
};

// One contiguous run of n elements with the logical-lane order of simd::reduce_run_f32;
// 16-bit floats use the same order in plain code.
template <typename Op, typename S>
double reduce_run(const S* x, int64_t n) {
  if constexpr (std::is_same_v<S, float>) {
    return simd::reduce_run_f32(Op::kKind, x, static_cast<size_t>(n));
  } else if constexpr (std::is_same_v<S, double>) {
    return simd::reduce_run_f64(Op::kKind, x, static_cast<size_t>(n));
  } else {
    double lanes[kSimdLanes];
    for (double& lane : lanes) lane = Op::identity();
    int64_t i = 0;
    for (; i + kSimdLanes <= n; i += kSimdLanes) {
      for (int64_t j = 0; j < kSimdLanes; ++j) lanes[j] = Op::step(lanes[j], widen_half(x[i + j]));
    }
    double tail = Op::identity();
    for (; i < n; ++i) tail = Op::step(tail, widen_half(x[i]));
    for (int64_t width = kSimdLanes / 2; width >= 1; width /= 2) {
      for (int64_t j = 0; j < width; ++j) lanes[j] = Op::step(lanes[j], lanes[j + width]);
    }
    return Op::step(lanes[0], tail);
  }
}

// Even split of [0, total) into `parts` pieces; piece k is [begin(k), begin(k + 1)).
inline int64_t split_point(int64_t total, int64_t parts, int64_t k) {
  return total * k / parts;
}

template <typename Op, typename S>
void reduce_rows(const S* in, S* out, int64_t rows, int64_t length, ComputePool& pool) {
  using A = double;
  int64_t blocks = length >= 2 * kRowBlock ? chunk_count(length, kRowBlock) : 1;
  if (blocks == 1) {
    int64_t groups = rows * length < kSerialElements
                         ? 1
                         : chunk_count(rows, std::max<int64_t>(1, kRowGroupElements / length));
    pool.parallel_for(groups, [&](int64_t group) {
      for (int64_t r = split_point(rows, groups, group); r < split_point(rows, groups, group + 1);
           ++r) {
        out[r] = convert_element<S>(reduce_run<Op>(in + r * length, length));
      }
    });
    return;
  }
  // Long rows: blocks of a multiple of kSimdLanes elements, partials combined in block order.
  int64_t block_length = (length + blocks - 1) / blocks;
  block_length = (block_length + kSimdLanes - 1) / kSimdLanes * kSimdLanes;
  blocks = (length + block_length - 1) / block_length;
  std::vector<A> partials(static_cast<size_t>(rows * blocks));
  pool.parallel_for(rows * blocks, [&](int64_t task) {
    int64_t r = task / blocks, b = task % blocks;
    int64_t begin = b * block_length, end = std::min(length, begin + block_length);
    partials[static_cast<size_t>(task)] = reduce_run<Op>(in + r * length + begin, end - begin);
  });
  for (int64_t r = 0; r < rows; ++r) {
    A acc = partials[static_cast<size_t>(r * blocks)];
    for (int64_t b = 1; b < blocks; ++b)
      acc = Op::step(acc, partials[static_cast<size_t>(r * blocks + b)]);
    out[r] = convert_element<S>(acc);
  }
}

// acc[c] = op over rows [row_begin, row_end) of x[row, c] for c in [0, width); x has
// `stride` elements per row.
template <typename Op, typename S>
void reduce_columns_block(const S* x, int64_t stride, int64_t row_begin, int64_t row_end,
                          int64_t width, double* acc) {
  for (int64_t c = 0; c < width; ++c) acc[c] = Op::identity();
  const S* first = x + row_begin * stride;
  auto rows = static_cast<size_t>(row_end - row_begin);
  if constexpr (std::is_same_v<S, float>) {
    simd::reduce_columns_f32(Op::kKind, first, static_cast<size_t>(stride), rows,
                             static_cast<size_t>(width), acc);
  } else if constexpr (std::is_same_v<S, double>) {
    simd::reduce_columns_f64(Op::kKind, first, static_cast<size_t>(stride), rows,
                             static_cast<size_t>(width), acc);
  } else {
    for (int64_t r = row_begin; r < row_end; ++r) {
      const S* row = x + r * stride;
      for (int64_t c = 0; c < width; ++c) acc[c] = Op::step(acc[c], widen_half(row[c]));
    }
  }
}

template <typename Op, typename S>
void reduce_columns(const S* in, S* out, const ReduceView& v, ComputePool& pool) {
  using A = double;
  int64_t total = v.outer * v.reduced * v.inner;
  bool serial = total < kSerialElements;
  int64_t column_chunks = serial ? 1 : chunk_count(v.inner, kColumnChunk);
  int64_t tasks = v.outer * column_chunks;
  int64_t row_blocks = 1;
  if (!serial && tasks < kTargetTasks) {
    row_blocks =
        std::min(chunk_count(v.reduced, kMinRowsPerBlock), (kTargetTasks + tasks - 1) / tasks);
  }
  auto locate = [&](int64_t task, int64_t& o, int64_t& b, int64_t& c0, int64_t& c1) {
    b = task % row_blocks;
    int64_t chunk = (task / row_blocks) % column_chunks;
    o = task / (row_blocks * column_chunks);
    c0 = split_point(v.inner, column_chunks, chunk);
    c1 = split_point(v.inner, column_chunks, chunk + 1);
  };
  if (row_blocks == 1) {
    // Each task owns whole columns and writes them out directly (all in one task when the
    // problem is small).
    int64_t per_call = serial ? tasks : 1;
    pool.parallel_for(tasks / per_call, [&](int64_t call_index) {
      for (int64_t task = call_index * per_call; task < (call_index + 1) * per_call; ++task) {
        int64_t o, b, c0, c1;
        locate(task, o, b, c0, c1);
        std::vector<A> acc(static_cast<size_t>(c1 - c0));
        reduce_columns_block<Op>(in + o * v.reduced * v.inner + c0, v.inner, 0, v.reduced, c1 - c0,
                                 acc.data());
        for (int64_t c = c0; c < c1; ++c) {
          out[o * v.inner + c] = convert_element<S>(acc[static_cast<size_t>(c - c0)]);
        }
      }
    });
    return;
  }
  // Few, tall column chunks: the reduced axis is split too (only when outer * inner is
  // small, so this buffer is too), and the partials combine in row-block order.
  // partials[(o * row_blocks + b) * inner + c]
  std::vector<A> partials(static_cast<size_t>(v.outer * row_blocks * v.inner));
  pool.parallel_for(tasks * row_blocks, [&](int64_t task) {
    int64_t o, b, c0, c1;
    locate(task, o, b, c0, c1);
    A* acc = partials.data() + (o * row_blocks + b) * v.inner + c0;
    reduce_columns_block<Op>(in + o * v.reduced * v.inner + c0, v.inner,
                             split_point(v.reduced, row_blocks, b),
                             split_point(v.reduced, row_blocks, b + 1), c1 - c0, acc);
  });
  for (int64_t o = 0; o < v.outer; ++o) {
    for (int64_t c = 0; c < v.inner; ++c) {
      A acc = partials[static_cast<size_t>(o * row_blocks * v.inner + c)];
      for (int64_t b = 1; b < row_blocks; ++b) {
        acc = Op::step(acc, partials[static_cast<size_t>((o * row_blocks + b) * v.inner + c)]);
      }
      out[o * v.inner + c] = convert_element<S>(acc);
    }
  }
}

template <typename Op>
void fast_reduce(const KernelCall& call, KernelFn reference) {
  const KernelInput& x = call.inputs[0];
  DType dtype = x.aval->dtype;
  ReduceView view = view_of(x.aval->shape, std::get<ReduceParams>(call.params).axes);
  if (!is_floating(dtype) || !view.ok || x.aval->num_elements() == 0) {
    reference(call);
    return;
  }
  visit_dtype(dtype, [&](auto tag) {
    using S = storage_t<decltype(tag)::value>;
    if constexpr (std::is_floating_point_v<S> || std::is_same_v<S, f16> ||
                  std::is_same_v<S, bf16>) {
      const S* in = static_cast<const S*>(x.data);
      S* out = static_cast<S*>(call.outputs[0].data);
      if (view.inner == 1) {
        reduce_rows<Op>(in, out, view.outer, view.reduced, call.pool);
      } else {
        reduce_columns<Op>(in, out, view, call.pool);
      }
    }
  });
}

void cpu_reduce_sum(const KernelCall& call) {
  fast_reduce<SumOp>(call, ref::reduce_sum);
}
void cpu_reduce_max(const KernelCall& call) {
  fast_reduce<ExtremeOp<true>>(call, ref::reduce_max);
}
void cpu_reduce_min(const KernelCall& call) {
  fast_reduce<ExtremeOp<false>>(call, ref::reduce_min);
}

}  // namespace

void register_cpu_reduce(PrimTable& table) {
  table[prim::reduce_sum].cpu_kernel = cpu_reduce_sum;
  table[prim::reduce_max].cpu_kernel = cpu_reduce_max;
  table[prim::reduce_min].cpu_kernel = cpu_reduce_min;
}

}  // namespace kiln
