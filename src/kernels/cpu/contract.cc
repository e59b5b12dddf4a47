// Fast dot_general: general dimension numbers become one (batched) GEMM. An operand whose
// free and contracting axes each merge into one stride is used in place, transposed or
// not; any other layout, and any dtype other than the compute type, is first packed into
// a canonical [batch, rows, cols] buffer. f32 and 16-bit floats compute with oneDNN's
// sgemm (16-bit values widened to f32, results rounded once), f64 with kiln's own loop;
// integer dot products run the reference kernel.
#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/element_convert.h"
#include "kernels/contract_layout.h"
#include "kernels/cpu/contract_kernels.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/gemm.h"
#include "prims/ids/contract.h"

namespace kiln {
namespace {

// Elements per chunk of the conversion and packing loops: enough to amortise a chunk.
constexpr int64_t kCopyChunk = 1 << 15;

// The single stride of a group of axes that walks its elements in row-major order, if any.
// Size-1 axes do not matter; a group with one element at most has stride 1.
bool merged_stride(const Dims& sizes, const Dims& strides, int64_t& stride) {
  stride = 1;
  bool first = true;
  int64_t expected = 0;
  for (size_t axis = sizes.size(); axis-- > 0;) {
    if (sizes[axis] == 1) continue;
    if (first) {
      stride = strides[axis];
      expected = strides[axis] * sizes[axis];
      first = false;
    } else if (strides[axis] != expected) {
      return false;
    } else {
      expected *= sizes[axis];
    }
  }
  return true;
}

// A rows x cols matrix inside an operand.
struct MatrixView {
  bool usable = false;
  bool trans = false;
  int64_t ld = 0;
};

MatrixView matrix_view(int64_t rows, int64_t cols, const Dims& row_sizes, const Dims& row_strides,
                       const Dims& col_sizes, const Dims& col_strides) {
  int64_t row_stride = 0, col_stride = 0;
  if (!merged_stride(row_sizes, row_strides, row_stride) ||
      !merged_stride(col_sizes, col_strides, col_stride)) {
    return {};
  }
  if ((cols <= 1 || col_stride == 1) && (rows <= 1 || row_stride >= cols)) {
    return {true, false, rows <= 1 ? std::max<int64_t>(cols, 1) : row_stride};
  }
  if ((rows <= 1 || row_stride == 1) && (cols <= 1 || col_stride >= rows)) {
    return {true, true, cols <= 1 ? std::max<int64_t>(rows, 1) : col_stride};
  }
  return {};
}

// Packs operand elements into a dense [batch, rows, cols] buffer of T.
template <typename T>
void pack(ComputePool& pool, DType dtype, const void* data, const std::vector<int64_t>& batch,
          const std::vector<int64_t>& rows, const std::vector<int64_t>& cols, T* out) {
  int64_t num_rows = static_cast<int64_t>(batch.size() * rows.size());
  int64_t num_cols = static_cast<int64_t>(cols.size());
  if (num_rows == 0 || num_cols == 0) return;
  int64_t rows_per_chunk = std::max<int64_t>(1, kCopyChunk / num_cols);
  int64_t chunks = (num_rows + rows_per_chunk - 1) / rows_per_chunk;
  visit_dtype(dtype, [&](auto tag) {
    using S = storage_t<decltype(tag)::value>;
    const S* in = static_cast<const S*>(data);
    pool.parallel_for(chunks, [&](int64_t chunk) {
      int64_t end = std::min(num_rows, (chunk + 1) * rows_per_chunk);
      for (int64_t r = chunk * rows_per_chunk; r < end; ++r) {
        int64_t base = batch[static_cast<size_t>(r) / rows.size()] +
                       rows[static_cast<size_t>(r) % rows.size()];
        T* dst = out + r * num_cols;
        for (int64_t c = 0; c < num_cols; ++c) {
          dst[c] = static_cast<T>(widen(in[base + cols[static_cast<size_t>(c)]]));
        }
      }
    });
  });
}

template <typename T>
void dot_in(const KernelCall& call, const DotLayout& layout) {
  const KernelInput& lhs = call.inputs[0];
  const KernelInput& rhs = call.inputs[1];
  const KernelOutput& out = call.outputs[0];
  DType compute = std::is_same_v<T, float> ? DType::f32 : DType::f64;
  int64_t m = layout.lhs_free.count(), n = layout.rhs_free.count(), k = layout.contract.count();
  int64_t batches = layout.batch.count();
  if (batches * m * n == 0) return;
  if (k == 0) {
    // An empty sum: zeros, whose bits are zero in every dtype.
    std::memset(out.data, 0, static_cast<size_t>(out.aval->size_bytes()));
    return;
  }

  // Each operand: in place when its dtype and layout allow, else packed.
  struct Operand {
    const T* data = nullptr;
    std::vector<T> packed;
    std::vector<int64_t> batch_offsets;
    MatrixView view;
  };
  auto prepare = [&](const KernelInput& input, bool is_lhs) {
    Operand op;
    const AxisGroup& free = is_lhs ? layout.lhs_free : layout.rhs_free;
    const Dims& free_strides = is_lhs ? free.lhs_strides : free.rhs_strides;
    const Dims& sum_strides = is_lhs ? layout.contract.lhs_strides : layout.contract.rhs_strides;
    const Dims& batch_strides = is_lhs ? layout.batch.lhs_strides : layout.batch.rhs_strides;
    // lhs is m x k (rows = free); rhs is k x n (rows = contracting).
    if (input.aval->dtype == compute) {
      op.view =
          is_lhs ? matrix_view(m, k, free.sizes, free_strides, layout.contract.sizes, sum_strides)
                 : matrix_view(k, n, layout.contract.sizes, sum_strides, free.sizes, free_strides);
    }
    if (op.view.usable) {
      op.data = static_cast<const T*>(input.data);
      op.batch_offsets = offset_table(layout.batch.sizes, batch_strides);
      return op;
    }
    std::vector<int64_t> batch_table = offset_table(layout.batch.sizes, batch_strides);
    std::vector<int64_t> free_table = offset_table(free.sizes, free_strides);
    std::vector<int64_t> sum_table = offset_table(layout.contract.sizes, sum_strides);
    // Packed as [batch, free, contracting]: lhs as m x k, rhs as the rows of rhs^T (n x k),
    // so B is then used transposed.
    int64_t rows = is_lhs ? m : n;
    op.packed.resize(static_cast<size_t>(batches * rows * k));
    pack(call.pool, input.aval->dtype, input.data, batch_table, free_table, sum_table,
         op.packed.data());
    op.view = {true, !is_lhs, k};
    op.data = op.packed.data();
    for (int64_t b = 0; b < batches; ++b) op.batch_offsets.push_back(b * rows * k);
    return op;
  };
  Operand a = prepare(lhs, true);
  Operand b = prepare(rhs, false);

  bool direct_out = out.aval->dtype == compute;
  std::vector<T> result;
  if (!direct_out) result.resize(static_cast<size_t>(batches * m * n));
  T* c = direct_out ? static_cast<T*>(out.data) : result.data();

  GemmDims dims{.trans_a = a.view.trans,
                .trans_b = b.view.trans,
                .m = m,
                .n = n,
                .k = k,
                .lda = a.view.ld,
                .ldb = b.view.ld,
                .ldc = n};
  GemmBlocks blocks = gemm_blocks(m, n, k);
  call.pool.parallel_for(batches * blocks.count, [&](int64_t chunk) {
    int64_t batch = chunk / blocks.count;
    size_t at = static_cast<size_t>(batch);
    gemm_block(dims, blocks, chunk % blocks.count, a.data + a.batch_offsets[at],
               b.data + b.batch_offsets[at], c + batch * m * n);
  });
  if (!direct_out) convert_from(call.pool, c, batches * m * n, out.aval->dtype, out.data);
}

}  // namespace

template <typename T>
void convert_to(ComputePool& pool, DType dtype, const void* in, int64_t count, T* out) {
  visit_dtype(dtype, [&](auto tag) {
    using S = storage_t<decltype(tag)::value>;
    const S* src = static_cast<const S*>(in);
    pool.parallel_for((count + kCopyChunk - 1) / kCopyChunk, [&](int64_t chunk) {
      int64_t end = std::min(count, (chunk + 1) * kCopyChunk);
      for (int64_t i = chunk * kCopyChunk; i < end; ++i) out[i] = static_cast<T>(widen(src[i]));
    });
  });
}

template <typename T>
void convert_from(ComputePool& pool, const T* in, int64_t count, DType dtype, void* out) {
  visit_dtype(dtype, [&](auto tag) {
    using D = storage_t<decltype(tag)::value>;
    D* dst = static_cast<D*>(out);
    pool.parallel_for((count + kCopyChunk - 1) / kCopyChunk, [&](int64_t chunk) {
      int64_t end = std::min(count, (chunk + 1) * kCopyChunk);
      for (int64_t i = chunk * kCopyChunk; i < end; ++i) dst[i] = convert_element<D>(in[i]);
    });
  });
}

template void convert_to<float>(ComputePool&, DType, const void*, int64_t, float*);
template void convert_to<double>(ComputePool&, DType, const void*, int64_t, double*);
template void convert_from<float>(ComputePool&, const float*, int64_t, DType, void*);
template void convert_from<double>(ComputePool&, const double*, int64_t, DType, void*);

void cpu_dot_general(const KernelCall& call) {
  DType in = call.inputs[0].aval->dtype;
  DType out = call.outputs[0].aval->dtype;
  DotLayout layout = dot_layout(call.inputs[0].aval->shape, call.inputs[1].aval->shape,
                                std::get<DotGeneralParams>(call.params));
  if (in == DType::f64 || out == DType::f64) {
    dot_in<double>(call, layout);
  } else {
    dot_in<float>(call, layout);
  }
}

namespace {

// oneDNN's GEMMs are float ones: integer contractions run the reference kernel.
bool supports_dot_general(std::span<const AbstractValue> inputs, std::span<const AbstractValue>,
                          const Params&) {
  return is_floating(inputs[0].dtype);
}

}  // namespace

void register_cpu_contract(PrimTable& table) {
  table[prim::dot_general].cpu_kernel = cpu_dot_general;
  table[prim::dot_general].cpu_supports = supports_dot_general;
  table[prim::conv_general_dilated].cpu_kernel = cpu_conv_general_dilated;
}

}  // namespace kiln
