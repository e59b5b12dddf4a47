// Devices and placement. kiln runs on CPU devices; KILN_CPU_DEVICES=N splits the machine
// into N logical CPU devices (like XLA's --xla_force_host_platform_device_count) so that
// sharded programs can be developed and tested on one machine. Each device executes its
// queue of kernels in order on its own thread; all devices share one compute pool.
//
//   for (kiln::Device* d : kiln::devices()) std::cout << d->to_string() << "\n";
//   kiln::Array y = kiln::device_put(x, kiln::device(1));
//   std::cout << kiln::placement(y);   // which device holds which bytes
#pragma once

#include <cstdint>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "kiln/array.h"

namespace kiln {

struct MemoryStats {
  int64_t live_bytes = 0;      // held by arrays (and kernels in flight) now
  int64_t peak_bytes = 0;      // highest live_bytes so far
  int64_t reserved_bytes = 0;  // live plus freed blocks the allocator keeps for reuse
  int64_t num_allocations = 0;
  // Allocations the cache could not serve: new memory from the OS, which costs a page fault
  // per 4 KiB at first touch. A compiled step that runs again should add none.
  int64_t system_allocations = 0;
  // Cached blocks given back to the OS to make room for more recently freed ones.
  int64_t cache_evictions = 0;
};

class Device {
 public:
  virtual ~Device() = default;
  int id() const { return id_; }
  virtual std::string_view kind() const = 0;
  std::string to_string() const;  // "cpu:0"
  virtual MemoryStats memory_stats() const = 0;
  virtual void reset_peak_memory() = 0;
  // Threads of the compute pool this device's kernels use.
  virtual int compute_threads() const = 0;
  // Waits until every op queued on this device so far has run.
  virtual void synchronize() = 0;

 protected:
  explicit Device(int id) : id_(id) {}

 private:
  int id_;
};

// All devices, in id order. The first call starts the runtime (reads KILN_CPU_DEVICES).
std::span<Device* const> devices();
Device& device(int id, CallSite site = {});
// Where ops without array operands (iota, from_host) put their result.
Device& default_device();

// Makes `device` the default for this thread until the scope ends.
class DefaultDeviceScope {
 public:
  explicit DefaultDeviceScope(Device& device);
  ~DefaultDeviceScope();
  DefaultDeviceScope(const DefaultDeviceScope&) = delete;
  DefaultDeviceScope& operator=(const DefaultDeviceScope&) = delete;

 private:
  Device* previous_;
};

// A copy of `x` on `device` (the same buffer if it is already there), committed to that
// device. Asynchronous. As in JAX, arrays you did not place explicitly (literals,
// from_host without a device) are *uncommitted*: an op moves them to the device of its
// committed operands. Two committed operands on different devices are an error.
Array device_put(const Array& x, Device& device, CallSite site = {});

// The device `x` is committed to, or null when it is uncommitted or not concrete (then new
// arrays made "like" it go to the default device and stay movable).
Device* device_of(const Array& x);

// Waits for all devices.
void synchronize_all();

// Which device holds which part of an array; printable.
struct PlacementPiece {
  Device* device;
  Dims start;  // index of the piece's first element
  Dims limit;  // one past its last element, per axis
  int64_t bytes;
};
struct Placement {
  AbstractValue aval;
  std::vector<PlacementPiece> pieces;
  bool committed = false;
  std::string to_string() const;
};
Placement placement(const Array& x, CallSite site = {});
std::ostream& operator<<(std::ostream& out, const Placement& placement);

// Process-wide counters of host <-> device traffic.
struct TransferStats {
  int64_t host_syncs = 0;  // to_host / item / to_string calls that waited for a value
  int64_t device_to_host_bytes = 0;
  int64_t host_to_device = 0;  // from_host calls
  int64_t host_to_device_bytes = 0;
};
TransferStats transfer_stats();

}  // namespace kiln
