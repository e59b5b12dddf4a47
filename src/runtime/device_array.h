// The concrete array: a buffer on a device plus the completion of the kernel that fills it.
#pragma once

#include <memory>

#include "kiln/array.h"
#include "prims/registry.h"
#include "runtime/allocator.h"
#include "runtime/completion.h"
#include "runtime/cpu_device.h"

namespace kiln {

class DeviceArray final : public ArrayImpl {
 public:
  DeviceArray(AbstractValue aval, CpuDevice* device, std::shared_ptr<Buffer> buffer,
              std::shared_ptr<Completion> ready)
      : ArrayImpl(std::move(aval)),
        device_(device),
        buffer_(std::move(buffer)),
        ready_(std::move(ready)) {}

  CpuDevice* device() const { return device_; }
  const std::shared_ptr<Buffer>& buffer() const { return buffer_; }
  const std::shared_ptr<Completion>& ready() const { return ready_; }

 private:
  CpuDevice* device_;
  std::shared_ptr<Buffer> buffer_;
  std::shared_ptr<Completion> ready_;
};

// The DeviceArray behind `array`, or a clear error if it is not concrete (a tracer used
// outside its transformation).
const DeviceArray& concrete(const Array& array, CallSite site, std::string_view what);

// Waits for the array and rethrows its kernel's error, if any.
void wait_ready(const DeviceArray& array, CallSite site);

// Runtime-wide state beyond the devices.
CpuDevice& cpu_device(Device& device);
void count_host_sync(int64_t bytes);
void count_host_to_device(int64_t bytes);

}  // namespace kiln
