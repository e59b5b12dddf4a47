// Fast CPU transpose. Axes that stay adjacent and in order are merged first, so any rank
// reduces to one of: a plain copy, a copy of contiguous rows in a new order, or a batch of
// 2-D transposes between the input's innermost axis and the output's innermost axis. The
// last is done in square tiles small enough to stay in L1 while both the reads and the
// writes of a tile touch few cache lines; tiles are split across the pool by sizes alone.
// 4-byte elements take a vector path instead where the machine has one: bands of 16
// input rows, each output row receiving one whole cache line per step, with the stores
// bypassing the caches when the output is too large to be read back from them (about 3x
// the tiles' bandwidth on GPT-2's token table; `kiln bench ops`).
#include <algorithm>
#include <cstring>
#include <utility>

#include "base/check.h"
#include "kernels/cpu/shape_copy.h"
#include "kernels/cpu/shape_kernels.h"
#include "kernels/cpu/transpose_simd.h"

namespace kiln::shape_kernels {
namespace {

// Output axis k of the transpose is input axis perm[k].
struct TransposePlan {
  Dims dims;  // input sizes
  Dims perm;
};

// Drops size-1 axes and merges runs of input axes that appear consecutively in the output.
TransposePlan collapse(const Shape& shape, const Dims& permutation) {
  int64_t rank = shape.rank();
  Dims renumbered(static_cast<size_t>(rank), -1);
  Dims dims;
  for (int64_t axis = 0; axis < rank; ++axis) {
    if (shape[axis] == 1) continue;
    renumbered[static_cast<size_t>(axis)] = static_cast<int64_t>(dims.size());
    dims.push_back(shape[axis]);
  }
  Dims group_first, group_last;  // input axes of each group, groups in output order
  for (int64_t axis : permutation) {
    int64_t kept = renumbered[static_cast<size_t>(axis)];
    if (kept < 0) continue;
    if (!group_last.empty() && kept == group_last.back() + 1) {
      group_last.back() = kept;
    } else {
      group_first.push_back(kept);
      group_last.push_back(kept);
    }
  }
  size_t groups = group_first.size();
  TransposePlan plan{Dims(groups, 1), Dims(groups, 0)};
  for (size_t g = 0; g < groups; ++g) {
    int64_t id = 0;  // the group's position in input order
    for (size_t h = 0; h < groups; ++h) id += group_first[h] < group_first[g] ? 1 : 0;
    plan.perm[g] = id;
    for (int64_t axis = group_first[g]; axis <= group_last[g]; ++axis) {
      plan.dims[static_cast<size_t>(id)] *= dims[static_cast<size_t>(axis)];
    }
  }
  return plan;
}

// A batch of 2-D transposes: in the input, i is the contiguous axis and j has stride
// in_j; in the output, j is contiguous and i has stride out_i. Batch axes carry their
// own strides.
struct TilePlan {
  int64_t n_i, n_j, in_j, out_i;
  Dims batch_sizes, batch_in, batch_out;
};

// Where batch number `batch` (row-major over the batch axes) starts in the input and the
// output, in elements.
std::pair<int64_t, int64_t> batch_offsets(const TilePlan& plan, int64_t batch) {
  int64_t in_offset = 0, out_offset = 0;
  for (size_t axis = plan.batch_sizes.size(); axis-- > 0;) {
    int64_t index = batch % plan.batch_sizes[axis];
    batch /= plan.batch_sizes[axis];
    in_offset += index * plan.batch_in[axis];
    out_offset += index * plan.batch_out[axis];
  }
  return {in_offset, out_offset};
}

template <typename T>
void transpose_tiles(const T* in, T* out, const TilePlan& plan, ComputePool& pool) {
  // 64x64 tiles (8-16 KiB) of up to 4-byte elements, 32x32 (8 KiB) of 8-byte ones.
  constexpr int64_t kTile = sizeof(T) >= 8 ? 32 : 64;
  int64_t tiles_i = (plan.n_i + kTile - 1) / kTile;
  int64_t tiles_j = (plan.n_j + kTile - 1) / kTile;
  int64_t batches = 1;
  for (int64_t size : plan.batch_sizes) batches *= size;
  int64_t tile_bytes =
      std::min(kTile, plan.n_i) * std::min(kTile, plan.n_j) * static_cast<int64_t>(sizeof(T));
  int64_t min_tiles = std::max<int64_t>(1, kMinChunkBytes / tile_bytes);
  parallel_range(pool, batches * tiles_i * tiles_j, min_tiles, [&](int64_t begin, int64_t end) {
    for (int64_t unit = begin; unit < end; ++unit) {
      int64_t ti = unit % tiles_i;
      int64_t tj = (unit / tiles_i) % tiles_j;
      int64_t batch = unit / (tiles_j * tiles_i);
      auto [in_offset, out_offset] = batch_offsets(plan, batch);
      int64_t i0 = ti * kTile, i1 = std::min(i0 + kTile, plan.n_i);
      int64_t j0 = tj * kTile, j1 = std::min(j0 + kTile, plan.n_j);
      const T* src = in + in_offset;
      T* dst = out + out_offset;
      int64_t ni = i1 - i0, nj = j1 - j0;
      if (ni * static_cast<int64_t>(sizeof(T)) < 64) {
        // Input rows shorter than a cache line: read them in place.
        for (int64_t i = 0; i < ni; ++i) {
          T* row = dst + (i0 + i) * plan.out_i + j0;
          const T* column = src + j0 * plan.in_j + i0 + i;
          for (int64_t j = 0; j < nj; ++j) row[j] = column[j * plan.in_j];
        }
        continue;
      }
      // Through a contiguous buffer: reading a tile straight across its rows touches
      // kTile lines a whole row stride apart, which for power-of-two strides all land in
      // one L1 set and evict each other. Here each input row and each output row is
      // streamed once, and only the buffer is walked across.
      T buffer[kTile * kTile];
      for (int64_t j = 0; j < nj; ++j) {
        std::memcpy(buffer + j * kTile, src + (j0 + j) * plan.in_j + i0,
                    static_cast<size_t>(ni) * sizeof(T));
      }
      for (int64_t i = 0; i < ni; ++i) {
        T* row = dst + (i0 + i) * plan.out_i + j0;
        for (int64_t j = 0; j < nj; ++j) row[j] = buffer[j * kTile + i];
      }
    }
  });
}

// Outputs at least this large are written with streaming stores: they cannot stay in the
// caches for their reader anyway (the last level holds 32 MiB on the machines we measure,
// shared by every core), and streaming skips reading each line before writing it.
constexpr int64_t kStreamOutputBytes = int64_t{8} << 20;

// The vector path for 4-byte elements (see the file comment). A unit of work is one band
// of 16 input rows over at most kBandLength of its columns; the last band of a batch may
// be shorter and, with the columns that do not fill a vector step, is moved by scalar code.
void transpose_bands_u32(const uint32_t* in, uint32_t* out, const TilePlan& plan,
                         ComputePool& pool) {
  constexpr int64_t kBand = 16;
  constexpr int64_t kBandLength = 1024;
  int64_t bands = (plan.n_j + kBand - 1) / kBand;
  int64_t blocks = (plan.n_i + kBandLength - 1) / kBandLength;
  int64_t batches = 1;
  for (int64_t size : plan.batch_sizes) batches *= size;
  constexpr int64_t kAlign = 32 / sizeof(uint32_t);  // streaming stores need 32-byte rows
  bool stream = batches * plan.n_i * plan.n_j * int64_t{sizeof(uint32_t)} >= kStreamOutputBytes &&
                reinterpret_cast<uintptr_t>(out) % 32 == 0 && plan.out_i % kAlign == 0;
  for (int64_t stride : plan.batch_out) stream = stream && stride % kAlign == 0;
  parallel_range(pool, batches * bands * blocks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t unit = begin; unit < end; ++unit) {
      int64_t block = unit % blocks;
      int64_t band = (unit / blocks) % bands;
      int64_t batch = unit / (blocks * bands);
      auto [in_offset, out_offset] = batch_offsets(plan, batch);
      int64_t i0 = block * kBandLength, ni = std::min(kBandLength, plan.n_i - i0);
      int64_t j0 = band * kBand, nj = std::min(kBand, plan.n_j - j0);
      const uint32_t* src = in + in_offset + j0 * plan.in_j + i0;
      uint32_t* dst = out + out_offset + i0 * plan.out_i + j0;
      int64_t moved =
          nj == kBand ? simd::transpose_band16_u32(src, plan.in_j, dst, plan.out_i, ni, stream) : 0;
      for (int64_t i = moved; i < ni; ++i) {
        for (int64_t j = 0; j < nj; ++j) dst[i * plan.out_i + j] = src[j * plan.in_j + i];
      }
    }
  });
}

}  // namespace

void cpu_transpose(const KernelCall& call) {
  const Shape& in_shape = call.inputs[0].aval->shape;
  int64_t width = dtype_size(call.inputs[0].aval->dtype);
  int64_t total = in_shape.num_elements();
  if (total == 0) return;
  TransposePlan plan = collapse(in_shape, std::get<TransposeParams>(call.params).permutation);
  int64_t rank = static_cast<int64_t>(plan.dims.size());
  const void* in = call.inputs[0].data;
  void* out = call.outputs[0].data;
  if (rank <= 1) return parallel_memcpy(out, in, total * width, call.pool);

  Dims in_strides = Shape(plan.dims).strides();
  Dims out_sizes, out_strides;
  for (int64_t k = 0; k < rank; ++k) out_sizes.push_back(plan.dims[plan.perm[k]]);
  out_strides = Shape(out_sizes).strides();
  auto last = static_cast<size_t>(rank - 1);
  if (plan.perm[last] == rank - 1) {
    // The innermost axis stays innermost: whole rows move, each one memcpy.
    Block block;
    for (size_t k = 0; k < static_cast<size_t>(rank); ++k) {
      block.sizes.push_back(out_sizes[k]);
      block.src_strides.push_back(in_strides[plan.perm[k]]);
      block.dst_strides.push_back(out_strides[k]);
    }
    return block_copy(in, out, block, width, call.pool);
  }
  TilePlan tiles{.n_i = plan.dims[last],
                 .n_j = plan.dims[plan.perm[last]],
                 .in_j = in_strides[plan.perm[last]],
                 .out_i = 0,
                 .batch_sizes = {},
                 .batch_in = {},
                 .batch_out = {}};
  for (size_t k = 0; k < last; ++k) {
    if (plan.perm[k] == rank - 1) {
      tiles.out_i = out_strides[k];
    } else {
      tiles.batch_sizes.push_back(out_sizes[k]);
      tiles.batch_in.push_back(in_strides[plan.perm[k]]);
      tiles.batch_out.push_back(out_strides[k]);
    }
  }
  switch (width) {
    case 1:
      return transpose_tiles(static_cast<const uint8_t*>(in), static_cast<uint8_t*>(out), tiles,
                             call.pool);
    case 2:
      return transpose_tiles(static_cast<const uint16_t*>(in), static_cast<uint16_t*>(out), tiles,
                             call.pool);
    case 4:
      if (tiles.n_i >= 8 && tiles.n_j >= 16 && simd::transpose_band16_u32_vectorised()) {
        return transpose_bands_u32(static_cast<const uint32_t*>(in), static_cast<uint32_t*>(out),
                                   tiles, call.pool);
      }
      return transpose_tiles(static_cast<const uint32_t*>(in), static_cast<uint32_t*>(out), tiles,
                             call.pool);
    case 8:
      return transpose_tiles(static_cast<const uint64_t*>(in), static_cast<uint64_t*>(out), tiles,
                             call.pool);
    default:
      KILN_CHECK(false, "element width {}", width);
  }
}

}  // namespace kiln::shape_kernels
