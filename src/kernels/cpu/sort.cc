// Fast CPU kernel of sort. Lines along the sort dimension are independent, so chunks of
// whole lines run in parallel (chunk boundaries from the sizes only). Within a line, a
// single 32-bit key (the sort behind kiln::random::permutation) is sorted by a stable LSD
// radix sort on order-preserving unsigned images of the keys; everything else uses
// std::stable_sort under the reference order. Both are stable sorts under the same total
// order, so the permutation, and hence every result bit, equals the reference kernel's.
#include <algorithm>
#include <bit>
#include <cstring>
#include <numeric>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/sort_order.h"
#include "prims/ids/sort.h"

namespace kiln {
namespace {

// Lines shorter than this sort by comparison; radix passes cost ~4 scans of 256 buckets.
constexpr int64_t kRadixMinLength = 512;
constexpr int64_t kMinChunkElements = 32768;

// An unsigned image of a 32-bit key whose unsigned order is the sort order
// (kernels/sort_order.h): integers flip the sign bit; floats map -0 to 0, every NaN to the
// largest image, and negative numbers to their complement.
uint32_t radix_image(DType dtype, const void* data, int64_t i) {
  uint32_t bits;
  std::memcpy(&bits, static_cast<const std::byte*>(data) + i * 4, 4);
  switch (dtype) {
    case DType::u32:
      return bits;
    case DType::i32:
      return bits ^ 0x80000000u;
    default: {
      float value = std::bit_cast<float>(bits);
      if (std::isnan(value)) return 0xFFFFFFFFu;
      if (value == 0) bits = 0;
      return (bits & 0x80000000u) ? ~bits : bits | 0x80000000u;
    }
  }
}

bool radix_sortable(const KernelCall& call, int64_t num_keys) {
  DType dtype = call.inputs[0].aval->dtype;
  return num_keys == 1 && (dtype == DType::u32 || dtype == DType::i32 || dtype == DType::f32);
}

// Per-thread scratch for one line.
struct Scratch {
  std::vector<uint32_t> keys, keys_tmp;
  std::vector<int64_t> order, order_tmp;
};

void radix_order(const KernelInput& key, const sorting::Lines& lines, int64_t line,
                 Scratch& scratch) {
  auto n = static_cast<size_t>(lines.length);
  scratch.keys.resize(n);
  scratch.keys_tmp.resize(n);
  scratch.order_tmp.resize(n);
  for (size_t k = 0; k < n; ++k) {
    scratch.keys[k] =
        radix_image(key.aval->dtype, key.data, lines.at(line, static_cast<int64_t>(k)));
  }
  for (int shift = 0; shift < 32; shift += 8) {
    size_t count[257] = {};
    for (uint32_t value : scratch.keys) ++count[((value >> shift) & 0xFF) + 1];
    if (count[((scratch.keys[0] >> shift) & 0xFF) + 1] == n) continue;  // one digit: no-op pass
    for (size_t d = 1; d < 257; ++d) count[d] += count[d - 1];
    for (size_t k = 0; k < n; ++k) {
      size_t to = count[(scratch.keys[k] >> shift) & 0xFF]++;
      scratch.keys_tmp[to] = scratch.keys[k];
      scratch.order_tmp[to] = scratch.order[k];
    }
    scratch.keys.swap(scratch.keys_tmp);
    scratch.order.swap(scratch.order_tmp);
  }
}

void cpu_sort(const KernelCall& call) {
  const auto& params = std::get<SortParams>(call.params);
  sorting::Lines lines = sorting::lines_of(call.inputs[0].aval->shape, params.dimension);
  if (lines.count() == 0 || lines.length == 0) return;
  bool radix = radix_sortable(call, params.num_keys) && lines.length >= kRadixMinLength;
  int64_t lines_per_chunk = std::max<int64_t>(1, kMinChunkElements / lines.length);
  int64_t chunks = chunk_count(lines.count(), lines_per_chunk);
  call.pool.parallel_for(chunks, [&](int64_t chunk) {
    Scratch scratch;
    int64_t begin = lines.count() * chunk / chunks, end = lines.count() * (chunk + 1) / chunks;
    for (int64_t line = begin; line < end; ++line) {
      scratch.order.resize(static_cast<size_t>(lines.length));
      std::iota(scratch.order.begin(), scratch.order.end(), int64_t{0});
      if (radix) {
        radix_order(call.inputs[0], lines, line, scratch);
      } else {
        std::stable_sort(scratch.order.begin(), scratch.order.end(), [&](int64_t a, int64_t b) {
          for (int64_t key = 0; key < params.num_keys; ++key) {
            const KernelInput& keys = call.inputs[static_cast<size_t>(key)];
            int c = sorting::compare_at(keys.aval->dtype, keys.data, lines.at(line, a),
                                        lines.at(line, b));
            if (c != 0) return c < 0;
          }
          return false;
        });
      }
      for (size_t operand = 0; operand < call.inputs.size(); ++operand) {
        auto width = static_cast<size_t>(dtype_size(call.inputs[operand].aval->dtype));
        const auto* in = static_cast<const std::byte*>(call.inputs[operand].data);
        auto* out = static_cast<std::byte*>(call.outputs[operand].data);
        for (int64_t k = 0; k < lines.length; ++k) {
          std::memcpy(out + lines.at(line, k) * width,
                      in + lines.at(line, scratch.order[static_cast<size_t>(k)]) * width, width);
        }
      }
    }
  });
}

}  // namespace

void register_cpu_sort(PrimTable& table) {
  table[prim::sort].cpu_kernel = cpu_sort;
}

}  // namespace kiln
