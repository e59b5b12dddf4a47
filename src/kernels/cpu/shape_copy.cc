// Strided block copies for the layout family's fast kernels (see shape_copy.h).
#include "kernels/cpu/shape_copy.h"

#include <algorithm>
#include <cstring>

#include "base/check.h"
#include "kiln/error.h"

namespace kiln::shape_kernels {
namespace {

// `count` single elements of type T, `src_step` and `dst_step` elements apart (a src_step
// of 0 fills with one value).
template <typename T>
void copy_strided(const std::byte* src, std::byte* dst, int64_t count, int64_t src_step,
                  int64_t dst_step) {
  const T* in = reinterpret_cast<const T*>(src);
  T* out = reinterpret_cast<T*>(dst);
  if (src_step == 0) {
    T value = *in;
    if (dst_step == 1) {
      std::fill(out, out + count, value);
    } else {
      for (int64_t j = 0; j < count; ++j) out[j * dst_step] = value;
    }
  } else if (src_step == 1 && dst_step == 1) {
    std::memcpy(out, in, static_cast<size_t>(count) * sizeof(T));
  } else {
    for (int64_t j = 0; j < count; ++j) out[j * dst_step] = in[j * src_step];
  }
}

void copy_elements(const std::byte* src, std::byte* dst, int64_t count, int64_t src_step,
                   int64_t dst_step, int64_t width) {
  switch (width) {
    case 1:
      return copy_strided<uint8_t>(src, dst, count, src_step, dst_step);
    case 2:
      return copy_strided<uint16_t>(src, dst, count, src_step, dst_step);
    case 4:
      return copy_strided<uint32_t>(src, dst, count, src_step, dst_step);
    case 8:
      return copy_strided<uint64_t>(src, dst, count, src_step, dst_step);
    default:
      KILN_CHECK(false, "element width {}", width);
  }
}

// The block with size-1 axes dropped and neighbouring axes merged wherever both the
// source and the destination walk them as one longer axis.
Block simplify(const Block& block) {
  Block out{{}, {}, {}, block.src_base, block.dst_base};
  for (size_t axis = 0; axis < block.sizes.size(); ++axis) {
    int64_t size = block.sizes[axis];
    if (size == 1) continue;
    int64_t src = block.src_strides[axis], dst = block.dst_strides[axis];
    if (!out.sizes.empty() && out.src_strides.back() == src * size &&
        out.dst_strides.back() == dst * size) {
      out.sizes.back() *= size;
      out.src_strides.back() = src;
      out.dst_strides.back() = dst;
      continue;
    }
    out.sizes.push_back(size);
    out.src_strides.push_back(src);
    out.dst_strides.push_back(dst);
  }
  return out;
}

}  // namespace

void parallel_memcpy(void* dst, const void* src, int64_t bytes, ComputePool& pool) {
  parallel_range(pool, bytes, kMinChunkBytes, [&](int64_t begin, int64_t end) {
    std::memcpy(static_cast<std::byte*>(dst) + begin, static_cast<const std::byte*>(src) + begin,
                static_cast<size_t>(end - begin));
  });
}

void block_copy(const void* src, void* dst, const Block& block, int64_t width, ComputePool& pool) {
  for (int64_t size : block.sizes) {
    if (size == 0) return;
  }
  Block b = simplify(block);
  const auto* in = static_cast<const std::byte*>(src) + b.src_base * width;
  auto* out = static_cast<std::byte*>(dst) + b.dst_base * width;
  // The innermost axis, when contiguous on both sides, is one memcpy run.
  int64_t run = 1;
  if (!b.sizes.empty() && b.src_strides.back() == 1 && b.dst_strides.back() == 1) {
    run = b.sizes.back();
    b.sizes.pop_back();
    b.src_strides.pop_back();
    b.dst_strides.pop_back();
  }
  int64_t run_bytes = run * width;
  if (b.sizes.empty()) return parallel_memcpy(out, in, run_bytes, pool);

  // The last remaining axis is walked row by row (a row is one run); the axes before it
  // are the outer index. Work units are blocks of rows of one outer index.
  int64_t rank = static_cast<int64_t>(b.sizes.size());
  int64_t rows = b.sizes.back();
  int64_t src_step = b.src_strides.back(), dst_step = b.dst_strides.back();
  int64_t rows_per_unit = std::clamp<int64_t>(kMinChunkBytes / run_bytes, 1, rows);
  int64_t units_per_outer = (rows + rows_per_unit - 1) / rows_per_unit;
  int64_t outer = 1;
  for (int64_t axis = 0; axis + 1 < rank; ++axis) outer *= b.sizes[static_cast<size_t>(axis)];
  int64_t unit_bytes = rows_per_unit * run_bytes;
  int64_t min_units = std::max<int64_t>(1, kMinChunkBytes / unit_bytes);
  parallel_range(pool, outer * units_per_outer, min_units, [&](int64_t begin, int64_t end) {
    for (int64_t unit = begin; unit < end; ++unit) {
      int64_t o = unit / units_per_outer;
      int64_t first_row = (unit % units_per_outer) * rows_per_unit;
      int64_t count = std::min(rows_per_unit, rows - first_row);
      int64_t src_offset = first_row * src_step, dst_offset = first_row * dst_step;
      for (int64_t axis = rank - 2; axis >= 0; --axis) {
        auto a = static_cast<size_t>(axis);
        int64_t index = o % b.sizes[a];
        o /= b.sizes[a];
        src_offset += index * b.src_strides[a];
        dst_offset += index * b.dst_strides[a];
      }
      const std::byte* from = in + src_offset * width;
      std::byte* to = out + dst_offset * width;
      if (run == 1) {
        copy_elements(from, to, count, src_step, dst_step, width);
      } else {
        for (int64_t row = 0; row < count; ++row) {
          std::memcpy(to + row * dst_step * width, from + row * src_step * width,
                      static_cast<size_t>(run_bytes));
        }
      }
    }
  });
}

}  // namespace kiln::shape_kernels
