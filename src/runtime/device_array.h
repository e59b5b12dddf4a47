// The concrete array: a buffer on a device plus the completion of the kernel that fills it.
// As in JAX, an array is *committed* to its device when the user placed it there
// (device_put, from_host with a device) or computed it from committed arrays; an
// uncommitted array (a literal, a from_host on the default device) may be moved to
// wherever the other operands of an op are.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <span>
#include <utility>

#include "kiln/array.h"
#include "prims/registry.h"
#include "runtime/allocator.h"
#include "runtime/completion.h"
#include "runtime/cpu_device.h"
#include "runtime/sharded_array.h"

namespace kiln {

class DeviceArray final : public ArrayImpl {
 public:
  DeviceArray(AbstractValue aval, CpuDevice* device, std::shared_ptr<Buffer> buffer,
              std::shared_ptr<Completion> ready, bool committed)
      : ArrayImpl(std::move(aval)),
        device_(device),
        buffer_(std::move(buffer)),
        ready_(std::move(ready)),
        committed_(committed) {}

  CpuDevice* device() const { return device_; }
  const std::shared_ptr<Buffer>& buffer() const { return buffer_; }
  const std::shared_ptr<Completion>& ready() const { return ready_; }
  bool committed() const { return committed_; }
  // A donated array whose buffer a jit call took over: reading it is an error.
  bool deleted() const { return deleted_.load(std::memory_order_acquire); }
  void mark_deleted() const { deleted_.store(true, std::memory_order_release); }

 private:
  CpuDevice* device_;
  std::shared_ptr<Buffer> buffer_;
  std::shared_ptr<Completion> ready_;
  bool committed_;
  mutable std::atomic<bool> deleted_{false};
};

// A copy of `array` on `device`, queued there after `array`'s kernel (the same array if
// it is already there).
Array copy_to_device(const DeviceArray& array, const Array& handle, CpuDevice& device,
                     bool committed);

// A sharded array as one array for an eager op: a replicated one's first copy (no copy is
// made), else the blocks assembled onto the first block's device. Uncommitted, so that it
// follows the op's other operands.
Array gathered_for_eager(const ShardedArray& sharded, CallSite site);

// The DeviceArray behind `array`, or a clear error if it is not concrete (a tracer used
// outside its transformation).
const DeviceArray& concrete(const Array& array, CallSite site, std::string_view what);

// Where an op or a compiled call on `arrays` runs, by JAX's rule: on the device of the
// committed arrays, which must all share one; else on the first array's device; else on
// the default device. Every array must be concrete (see concrete(); `what` names the
// caller in that error). Two committed arrays on different devices are not an error here:
// `conflict` holds their indices, for the caller to name them in its own terms (an eager
// op's operands, a jitted function's arguments).
struct TargetDevice {
  CpuDevice* device = nullptr;
  bool committed = false;  // some array is committed: results are committed too
  std::optional<std::pair<size_t, size_t>> conflict;
};
TargetDevice target_of(std::span<const Array> arrays, CallSite site, std::string_view what);

// Waits for the array and rethrows its kernel's error, if any.
void wait_ready(const DeviceArray& array, CallSite site);

// The kernel that runs `prim` on operands and results of these types (eager ops and jit
// alike): the fast CPU kernel where it supports the call, else the reference kernel (always
// with KILN_KERNELS=ref).
KernelFn chosen_kernel(const PrimDef& prim, std::span<const AbstractValue> inputs,
                       std::span<const AbstractValue> outputs, const Params& params);

// Runtime-wide state beyond the devices.
CpuDevice& cpu_device(Device& device);
void count_host_sync(int64_t bytes);
// The host synchronizations the calling thread made (transfer_stats() counts every
// thread's): a training loop's own, without those of a background savepoint writer.
int64_t host_syncs_on_this_thread();
void count_host_to_device(int64_t bytes);

}  // namespace kiln
