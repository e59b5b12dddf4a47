// The set of devices, the default-device scope, and transfer counters.
#include "runtime/runtime.h"

#include <atomic>
#include <cctype>
#include <cstdlib>
#include <memory>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "base/check.h"
#include "base/compute_pool.h"
#include "runtime/device_array.h"

namespace kiln {
namespace {

struct Runtime {
  std::vector<std::unique_ptr<CpuDevice>> owned;
  std::vector<Device*> devices;
};

Runtime* created_runtime = nullptr;  // set once the runtime exists

// Waits for every device's queue when a thread that used the runtime exits. Kernels still
// queued when main returns would otherwise run while exit handlers tear down the libraries
// they use (oneDNN unmaps its generated code): the destructors of the exiting thread's
// thread_local objects run before any static destructor or exit handler.
struct DrainQueuesAtThreadExit {
  ~DrainQueuesAtThreadExit() {
    for (Device* device : created_runtime->devices) device->synchronize();
  }
};

Runtime& runtime() {
  // Never destroyed: arrays held in static storage may outlive any destruction order.
  static Runtime* instance = [] {
    register_all();
    (void)configured_kernels();  // a bad KILN_KERNELS is an error before any kernel runs
    int count = configured_cpu_device_count();
    size_t cache_bytes = default_allocator_cache_bytes();
    auto* state = new Runtime;
    for (int id = 0; id < count; ++id) {
      state->owned.push_back(std::make_unique<CpuDevice>(id, compute_pool(), cache_bytes));
      state->devices.push_back(state->owned.back().get());
    }
    created_runtime = state;
    return state;
  }();
  // Only once the runtime exists (a bad KILN_CPU_DEVICES throws above).
  thread_local DrainQueuesAtThreadExit drain;
  (void)drain;
  return *instance;
}

thread_local Device* scoped_default_device = nullptr;

std::atomic<int64_t> host_syncs{0};
std::atomic<int64_t> device_to_host_bytes{0};
std::atomic<int64_t> host_to_device_count{0};
std::atomic<int64_t> host_to_device_bytes{0};

}  // namespace

int parse_cpu_device_count(const std::string& text) {
  char* end = nullptr;
  long value = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0])) ||
      end != text.c_str() + text.size() || value < 1 || value > kMaxCpuDevices) {
    fail(kUnknownSite,
         fmt::format("KILN_CPU_DEVICES='{}' is not a device count between 1 and {}", text,
                     kMaxCpuDevices),
         "set KILN_CPU_DEVICES to the number of logical CPU devices you want (e.g. 4), or "
         "unset it for one device");
  }
  return static_cast<int>(value);
}

int configured_cpu_device_count() {
  const char* text = std::getenv("KILN_CPU_DEVICES");
  return text == nullptr ? 1 : parse_cpu_device_count(text);
}

std::string parse_kernels_setting(const char* value) {
  if (value == nullptr || std::string_view(value).empty()) return "fast";
  if (std::string_view(value) == "ref") return "ref";
  fail(kUnknownSite,
       fmt::format("KILN_KERNELS='{}' is not a kernel choice: the only value is 'ref'", value),
       "set KILN_KERNELS=ref for the reference kernels, or unset it for the fast ones");
}

std::string configured_kernels() {
  return parse_kernels_setting(std::getenv("KILN_KERNELS"));
}

std::string Device::to_string() const {
  return fmt::format("{}:{}", kind(), id());
}

std::span<Device* const> devices() {
  return runtime().devices;
}

Device& device(int id, CallSite site) {
  auto all = devices();
  if (id < 0 || id >= static_cast<int>(all.size())) {
    fail(site,
         fmt::format("there is no device {}: this process has {} device(s) (0..{})", id, all.size(),
                     all.size() - 1),
         "start the process with KILN_CPU_DEVICES=N for N logical CPU devices");
  }
  return *all[static_cast<size_t>(id)];
}

Device& default_device() {
  return scoped_default_device ? *scoped_default_device : *devices()[0];
}

DefaultDeviceScope::DefaultDeviceScope(Device& device) : previous_(scoped_default_device) {
  scoped_default_device = &device;
}
DefaultDeviceScope::~DefaultDeviceScope() {
  scoped_default_device = previous_;
}

void synchronize_all() {
  for (Device* device : devices()) device->synchronize();
}

CpuDevice& cpu_device(Device& device) {
  auto* cpu = dynamic_cast<CpuDevice*>(&device);
  KILN_CHECK(cpu != nullptr, "device {} is not a CPU device", device.to_string());
  return *cpu;
}

thread_local int64_t host_syncs_of_this_thread = 0;

void count_host_sync(int64_t bytes) {
  ++host_syncs_of_this_thread;
  host_syncs.fetch_add(1, std::memory_order_relaxed);
  device_to_host_bytes.fetch_add(bytes, std::memory_order_relaxed);
}

void count_host_to_device(int64_t bytes) {
  host_to_device_count.fetch_add(1, std::memory_order_relaxed);
  host_to_device_bytes.fetch_add(bytes, std::memory_order_relaxed);
}

int64_t host_syncs_on_this_thread() {
  return host_syncs_of_this_thread;
}

TransferStats transfer_stats() {
  return {host_syncs.load(), device_to_host_bytes.load(), host_to_device_count.load(),
          host_to_device_bytes.load()};
}

}  // namespace kiln
