// Caching allocator (see allocator.h).
#include "runtime/allocator.h"

#include <bit>
#include <cstdlib>
#include <new>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "base/trace_events.h"
#include "kiln/error.h"

namespace kiln {

Buffer::~Buffer() {
  owner_->release(data_, bytes_, capacity_);
}

CachingAllocator::CachingAllocator(size_t cache_limit_bytes, int device_id)
    : cache_limit_(cache_limit_bytes), device_id_(device_id) {}

void CachingAllocator::trace_live_bytes(int64_t live_bytes) const {
  trace::record_counter(trace::device_track(device_id_), "live bytes",
                        fmt::format("cpu:{}", device_id_), static_cast<double>(live_bytes));
}

CachingAllocator::~CachingAllocator() {
  release_cached();
}

size_t CachingAllocator::size_class(size_t bytes) {
  if (bytes == 0) return 0;
  if (bytes <= 4096) return (bytes + 63) & ~size_t{63};
  // Round up to a multiple of 1/8 of the enclosing power of two.
  size_t binade = std::bit_floor(bytes);
  size_t step = binade / 8;
  return (bytes + step - 1) / step * step;
}

std::shared_ptr<Buffer> CachingAllocator::allocate(size_t bytes) {
  size_t capacity = size_class(bytes);
  void* data = nullptr;
  {
    std::lock_guard lock(mutex_);
    auto it = cache_.find(capacity);
    if (oversized_.data != nullptr && oversized_.capacity == capacity) {
      data = std::exchange(oversized_, {}).data;
    } else if (it != cache_.end() && !it->second.empty()) {
      data = it->second.back().data;
      release_order_.erase(it->second.back().freed);
      it->second.pop_back();
      cached_bytes_ -= capacity;
    }
    stats_.live_bytes += static_cast<int64_t>(bytes);
    stats_.peak_bytes = std::max(stats_.peak_bytes, stats_.live_bytes);
    stats_.num_allocations += 1;
    if (data == nullptr) {
      stats_.reserved_bytes += static_cast<int64_t>(capacity);
      if (capacity > 0) stats_.system_allocations += 1;
    }
    // Under the lock, so that the counter's samples are in the order of its values.
    if (trace::recording()) trace_live_bytes(stats_.live_bytes);
  }
  if (data == nullptr && capacity > 0) {
    data = std::aligned_alloc(64, capacity);
    if (data == nullptr) {
      std::lock_guard lock(mutex_);
      stats_.live_bytes -= static_cast<int64_t>(bytes);
      stats_.reserved_bytes -= static_cast<int64_t>(capacity);
      fail(kUnknownSite, fmt::format("out of memory allocating {} bytes", bytes),
           "reduce the batch size or free arrays you no longer need");
    }
  }
  return std::make_shared<Buffer>(data, bytes, capacity, this);
}

bool CachingAllocator::make_room(size_t capacity, std::vector<void*>& evicted) {
  if (capacity > cache_limit_) return false;
  while (cached_bytes_ + capacity > cache_limit_) {
    // The oldest block is the first of its size class's list (lists are in release order).
    auto oldest = release_order_.begin();
    std::vector<CachedBlock>& blocks = cache_[oldest->second];
    evicted.push_back(blocks.front().data);
    blocks.erase(blocks.begin());
    cached_bytes_ -= oldest->second;
    stats_.reserved_bytes -= static_cast<int64_t>(oldest->second);
    stats_.cache_evictions += 1;
    release_order_.erase(oldest);
  }
  return true;
}

void CachingAllocator::release(void* data, size_t bytes, size_t capacity) {
  std::vector<void*> to_free;
  {
    std::lock_guard lock(mutex_);
    stats_.live_bytes -= static_cast<int64_t>(bytes);
    if (trace::recording()) trace_live_bytes(stats_.live_bytes);
    if (data != nullptr && make_room(capacity, to_free)) {
      uint64_t order = ++releases_;
      cache_[capacity].push_back({data, order});
      release_order_.emplace(order, capacity);
      cached_bytes_ += capacity;
    } else if (data != nullptr && cache_limit_ > 0) {
      // Larger than the whole cache: kept aside, in place of the last such block (a compiled
      // step whose arena outgrows the limit finds it again on the next call instead of
      // page-faulting it in every time).
      if (oversized_.data != nullptr) {
        to_free.push_back(oversized_.data);
        stats_.reserved_bytes -= static_cast<int64_t>(oversized_.capacity);
        stats_.cache_evictions += 1;
      }
      oversized_ = {data, capacity};
    } else {
      stats_.reserved_bytes -= static_cast<int64_t>(capacity);
      to_free.push_back(data);
    }
  }
  for (void* block : to_free) std::free(block);
}

MemoryStats CachingAllocator::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void CachingAllocator::reset_peak() {
  std::lock_guard lock(mutex_);
  stats_.peak_bytes = stats_.live_bytes;
}

void CachingAllocator::release_cached() {
  std::map<size_t, std::vector<CachedBlock>> cache;
  {
    std::lock_guard lock(mutex_);
    cache.swap(cache_);
    release_order_.clear();
    stats_.reserved_bytes -= static_cast<int64_t>(cached_bytes_);
    cached_bytes_ = 0;
    if (oversized_.data != nullptr) {
      cache[oversized_.capacity].push_back({oversized_.data, 0});
      stats_.reserved_bytes -= static_cast<int64_t>(oversized_.capacity);
      oversized_ = {};
    }
  }
  for (auto& [capacity, blocks] : cache) {
    for (const CachedBlock& block : blocks) std::free(block.data);
  }
}

size_t default_allocator_cache_bytes() {
#if defined(__SANITIZE_ADDRESS__)
  return 0;
#else
  if (const char* text = std::getenv("KILN_ALLOCATOR_CACHE_MB")) {
    char* end = nullptr;
    long long megabytes = std::strtoll(text, &end, 10);
    if (end == text || *end != '\0' || megabytes < 0) {
      fail(kUnknownSite,
           fmt::format("KILN_ALLOCATOR_CACHE_MB='{}' is not a non-negative integer", text),
           "set it to the number of MiB of freed blocks to keep for reuse, or unset it");
    }
    return static_cast<size_t>(megabytes) << 20;
  }
  return size_t{2} << 30;
#endif
}

}  // namespace kiln
