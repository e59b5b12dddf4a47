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

}  // namespace
}  // namespace kiln
