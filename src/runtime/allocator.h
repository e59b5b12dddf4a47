// Per-device caching allocator. Freed blocks are kept, by size class, for reuse: a fresh
// 64 MiB allocation from the OS costs a page fault per 4 KiB on first touch, which would
// halve the bandwidth of every large eager op. When the cache is full, the blocks freed
// longest ago go back to the OS to make room for the one just freed: what a program freed
// last is what it will ask for next (a compiled step's arena, call after call), while blocks
// left from earlier work (initialisation's temporaries) may never fit a request again.
// Statistics report what users care about: bytes held by live arrays now, at peak, what
// the allocator holds in total, and how often it had to go to the OS. One block larger
// than the cache's whole limit (the last one freed) is kept aside, outside the limit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "kiln/device.h"

namespace kiln {

class CachingAllocator;

// One allocation. Released to its allocator when the last reference goes.
class Buffer {
 public:
  Buffer(void* data, size_t bytes, size_t capacity, CachingAllocator* owner)
      : data_(data), bytes_(bytes), capacity_(capacity), owner_(owner) {}
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  void* data_;
  size_t bytes_;
  size_t capacity_;
  CachingAllocator* owner_;
};

class CachingAllocator {
 public:
  // cache_limit_bytes: freed blocks beyond this are returned to the OS at once.
  // device_id: which device's memory it is, for the trace's live-bytes counter.
  explicit CachingAllocator(size_t cache_limit_bytes, int device_id = 0);
  ~CachingAllocator();
  std::shared_ptr<Buffer> allocate(size_t bytes);
  MemoryStats stats() const;
  void reset_peak();
  // Returns all cached blocks to the OS.
  void release_cached();

  // Allocation granularity: 64-byte aligned, size classes 1/8 of a binade apart above
  // 4 KiB, so reuse wastes at most 12.5%.
  static size_t size_class(size_t bytes);

 private:
  friend class Buffer;
  void release(void* data, size_t bytes, size_t capacity);
  // While a trace records: the live bytes after an allocation or release.
  void trace_live_bytes(int64_t live_bytes) const;

  struct CachedBlock {
    void* data;
    uint64_t freed;  // release order: larger is more recent
  };
  // Makes room for `capacity` more cached bytes by taking the least recently freed blocks
  // out of the cache (into `evicted`, for the caller to free outside the lock). False when
  // the block is larger than the whole cache.
  bool make_room(size_t capacity, std::vector<void*>& evicted);

  mutable std::mutex mutex_;
  // By size class, each class's blocks in release order (reuse takes the last).
  std::map<size_t, std::vector<CachedBlock>> cache_;  // ordered: deterministic reuse
  // Every cached block by release order, oldest first: size class of each.
  std::map<uint64_t, size_t> release_order_;
  uint64_t releases_ = 0;
  // The last block freed that is larger than the cache's limit, kept outside it.
  struct OversizedBlock {
    void* data = nullptr;
    size_t capacity = 0;
  };
  OversizedBlock oversized_;
  size_t cache_limit_;
  int device_id_;
  size_t cached_bytes_ = 0;
  MemoryStats stats_;
};

// Default cache limit: KILN_ALLOCATOR_CACHE_MB if set, else 2 GiB; 0 under AddressSanitizer
// so that it still sees every use after free.
size_t default_allocator_cache_bytes();

}  // namespace kiln
