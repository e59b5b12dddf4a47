// The per-device caching allocator: size classes, reuse, cache limit, statistics.
#include <gtest/gtest.h>

#include "runtime/allocator.h"

namespace kiln {
namespace {

TEST(CachingAllocator, SizeClassesBoundWaste) {
  EXPECT_EQ(CachingAllocator::size_class(0), 0u);
  EXPECT_EQ(CachingAllocator::size_class(1), 64u);
  EXPECT_EQ(CachingAllocator::size_class(4096), 4096u);
  for (size_t bytes : {4097ul, 10000ul, 1000000ul, 67108864ul, 67108865ul}) {
    size_t size_class = CachingAllocator::size_class(bytes);
    EXPECT_GE(size_class, bytes);
    EXPECT_LE(size_class, bytes + bytes / 8 + 64) << bytes;
    EXPECT_EQ(size_class % 64, 0u);
  }
}

TEST(CachingAllocator, ReusesFreedBlocks) {
  CachingAllocator allocator(size_t{1} << 30);
  void* first = nullptr;
  {
    auto buffer = allocator.allocate(1 << 20);
    first = buffer->data();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % 64, 0u);
    EXPECT_EQ(allocator.stats().live_bytes, 1 << 20);
  }
  EXPECT_EQ(allocator.stats().live_bytes, 0);
  int64_t reserved = allocator.stats().reserved_bytes;
  EXPECT_GE(reserved, 1 << 20);
  auto again = allocator.allocate(1 << 20);
  EXPECT_EQ(again->data(), first);
  EXPECT_EQ(allocator.stats().reserved_bytes, reserved);
  EXPECT_EQ(allocator.stats().num_allocations, 2);
}

TEST(CachingAllocator, LimitZeroReturnsMemoryAtOnce) {
  CachingAllocator allocator(0);
  { auto buffer = allocator.allocate(12345); }
  EXPECT_EQ(allocator.stats().reserved_bytes, 0);
  EXPECT_EQ(allocator.stats().peak_bytes, 12345);
}

TEST(CachingAllocator, ReleaseCachedEmptiesTheCache) {
  CachingAllocator allocator(size_t{1} << 30);
  { auto a = allocator.allocate(5000), b = allocator.allocate(70000); }
  EXPECT_GT(allocator.stats().reserved_bytes, 0);
  allocator.release_cached();
  EXPECT_EQ(allocator.stats().reserved_bytes, 0);
  auto zero = allocator.allocate(0);
  EXPECT_EQ(zero->bytes(), 0u);
}

// The GPT-2 defect: blocks freed by earlier work (initialisation's temporaries) filled the
// cache, so a compiled step's arena, freed after each call, did not fit and went back to the
// OS, to be page-faulted in again by the next call. The least recently freed blocks now make
// room for the most recent one.
TEST(CachingAllocator, AFullCacheMakesRoomForTheBlockFreedLastByEvictingTheOldest) {
  constexpr size_t kMiB = size_t{1} << 20;
  CachingAllocator allocator(4 * kMiB);
  {
    // Three odd-sized blocks that no later request fits: 3.75 MiB of the 4 MiB cache.
    auto a = allocator.allocate(kMiB + kMiB / 4), b = allocator.allocate(kMiB + kMiB / 4),
         c = allocator.allocate(kMiB + kMiB / 4);
  }
  EXPECT_EQ(allocator.stats().system_allocations, 3);
  for (int call = 0; call < 5; ++call) {
    auto arena = allocator.allocate(2 * kMiB);  // the step's arena, call after call
  }
  MemoryStats stats = allocator.stats();
  EXPECT_EQ(stats.system_allocations, 4) << "the arena was allocated again after the first call";
  // Making room for 2 MiB evicted the two oldest blocks (1.25 MiB each), in release order.
  EXPECT_EQ(stats.cache_evictions, 2);
  EXPECT_EQ(stats.reserved_bytes,
            static_cast<int64_t>(2 * kMiB + CachingAllocator::size_class(kMiB + kMiB / 4)));
  // A block larger than the whole cache is kept aside, outside the limit, so that the next
  // request of its size needs no new memory, whatever is freed in between; a second such
  // block takes its place.
  for (int call = 0; call < 3; ++call) {
    auto huge = allocator.allocate(8 * kMiB);
    auto small = allocator.allocate(3 * kMiB / 2);  // freed after: must not evict the huge one
  }
  // (The 1.5 MiB block made room for itself by evicting the last 1.25 MiB one.)
  EXPECT_EQ(allocator.stats().system_allocations, 6);
  EXPECT_EQ(allocator.stats().cache_evictions, 3);
  EXPECT_EQ(allocator.stats().reserved_bytes,
            static_cast<int64_t>(2 * kMiB + 3 * kMiB / 2 + 8 * kMiB));
  { auto bigger = allocator.allocate(9 * kMiB); }
  EXPECT_EQ(allocator.stats().system_allocations, 7);
  EXPECT_EQ(allocator.stats().cache_evictions, 4);
  EXPECT_EQ(allocator.stats().reserved_bytes,
            static_cast<int64_t>(2 * kMiB + 3 * kMiB / 2 + 9 * kMiB));
  allocator.release_cached();
  EXPECT_EQ(allocator.stats().reserved_bytes, 0);
}

}  // namespace
}  // namespace kiln
