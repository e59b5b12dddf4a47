// The asynchronous CPU runtime: devices, placement, device_put, errors surfacing at
// synchronization with the user's call site, allocator and transfer statistics.
// Tests named *FourDevices* need KILN_CPU_DEVICES=4 (ctest sets it).
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <future>
#include <thread>

#include "kiln/device.h"
#include "kiln/jit.h"
#include "kiln/ops.h"
#include "runtime/device_array.h"
#include "runtime/runtime.h"
#include "support/errors.h"

namespace kiln {
namespace {

using testing::error_of;
using testing::fails_with;

using ::testing::HasSubstr;

void require_four_devices() {
  ASSERT_EQ(devices().size(), 4u) << "run this test with KILN_CPU_DEVICES=4 (ctest does)";
}

TEST(Runtime, DeviceCountFollowsEnvironment) {
  EXPECT_EQ(static_cast<int>(devices().size()), configured_cpu_device_count());
  for (size_t i = 0; i < devices().size(); ++i) {
    EXPECT_EQ(devices()[i]->id(), static_cast<int>(i));
    EXPECT_EQ(devices()[i]->kind(), "cpu");
    EXPECT_GE(devices()[i]->compute_threads(), 1);
  }
  EXPECT_EQ(&default_device(), devices()[0]);
}

TEST(Runtime, CpuDeviceCountParsing) {
  EXPECT_EQ(parse_cpu_device_count("4"), 4);
  EXPECT_EQ(parse_cpu_device_count("256"), 256);
  for (const char* bad : {"0", "-1", "257", "four", "", "4x", " 4"}) {
    std::string text = error_of([&] { parse_cpu_device_count(bad); });
    EXPECT_THAT(text, HasSubstr("KILN_CPU_DEVICES")) << bad;
    EXPECT_THAT(text, HasSubstr("between 1 and 256")) << bad;
    EXPECT_THAT(text, HasSubstr("HINT:")) << bad;
  }
}

// KILN_KERNELS=bogus used to run the fast kernels without a word.
TEST(Runtime, KernelsSettingParsing) {
  EXPECT_EQ(parse_kernels_setting(nullptr), "fast");
  EXPECT_EQ(parse_kernels_setting(""), "fast");
  EXPECT_EQ(parse_kernels_setting("ref"), "ref");
  for (const char* bad : {"bogus", "REF", "fast", " ref"}) {
    std::string text = error_of([&] { parse_kernels_setting(bad); });
    EXPECT_THAT(text, HasSubstr(fmt::format("KILN_KERNELS='{}'", bad))) << bad;
    EXPECT_THAT(text, HasSubstr("HINT:")) << bad;
  }
}

TEST(Runtime, UnknownDeviceIdIsAnError) {
  std::string text = error_of([] { device(99); });
  EXPECT_THAT(text, HasSubstr("there is no device 99"));
  EXPECT_THAT(text, HasSubstr("KILN_CPU_DEVICES"));
}

TEST(Runtime, DispatchIsAsynchronous) {
  Array x = from_host<float>({1, 2, 3}, {3});
  // Hold the device's queue with a task that waits for our signal; an op queued behind it
  // must return at once, unfinished.
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  cpu_device(x.device()).enqueue([released] { released.wait(); });
  Array y = exp(x);
  const auto& pending = dynamic_cast<const DeviceArray&>(*y.impl());
  EXPECT_FALSE(pending.ready()->ready());
  release.set_value();
  y.block_until_ready();
  EXPECT_TRUE(pending.ready()->ready());
  EXPECT_FLOAT_EQ(y.to_vector<float>()[2], std::exp(3.0f));
}

TEST(Runtime, KernelErrorSurfacesAtSynchronizationWithCallSite) {
  Array a = from_host<int32_t>({6, 7, 8}, {3});
  Array b = from_host<int32_t>({1, 0, 2}, {3});
  Array quotient = div(a, b);  // line of the failing op, reported below
  int failing_line = __LINE__ - 1;
  Array downstream = quotient + 1;  // depends on the failed value
  std::string text = error_of([&] { quotient.block_until_ready(); });
  EXPECT_THAT(text, HasSubstr("div failed while running: integer division by zero"));
  EXPECT_THAT(text, HasSubstr(fmt::format("runtime_test.cc:{}", failing_line)));
  EXPECT_THAT(text, HasSubstr("HINT:"));
  // The same error, still naming the original op, reaches everything computed from it.
  std::string later = error_of([&] { downstream.to_host(); });
  EXPECT_THAT(later, HasSubstr("div failed while running"));
  EXPECT_THAT(later, HasSubstr(fmt::format("runtime_test.cc:{}", failing_line)));
  // The device keeps working afterwards.
  EXPECT_EQ((a + 1).to_vector<int32_t>(), (std::vector<int32_t>{7, 8, 9}));
}

TEST(Runtime, HostTransfersAreCounted) {
  Array x = from_host<float>({1, 2, 3, 4}, {2, 2});
  TransferStats before = transfer_stats();
  (void)x.to_host();
  (void)(x * 2.0).to_vector<float>();
  Array one = from_host<float>({5}, {});
  EXPECT_EQ(one.item<float>(), 5.0f);
  TransferStats after = transfer_stats();
  EXPECT_EQ(after.host_syncs - before.host_syncs, 3);
  EXPECT_EQ(after.device_to_host_bytes - before.device_to_host_bytes, 16 + 16 + 4);
  EXPECT_GE(after.host_to_device - before.host_to_device, 2);
}

TEST(Runtime, AllocatorStatisticsTrackLiveAndPeakBytes) {
  Device& device = *devices().back();
  device.synchronize();
  MemoryStats before = device.memory_stats();
  {
    std::vector<float> values(1 << 18, 1.0f);  // 1 MiB
    Array x = from_host(values, {1 << 18}, &device);
    Array y = x * 2.0;
    y.block_until_ready();
    MemoryStats during = device.memory_stats();
    EXPECT_GE(during.live_bytes - before.live_bytes, 2 << 20);
    EXPECT_GE(during.peak_bytes, during.live_bytes);
    EXPECT_GE(during.reserved_bytes, during.live_bytes);
  }
  device.synchronize();
  EXPECT_EQ(device.memory_stats().live_bytes, before.live_bytes);
  device.reset_peak_memory();
  EXPECT_EQ(device.memory_stats().peak_bytes, device.memory_stats().live_bytes);
}

TEST(Runtime, ItemNeedsOneElementAndToVectorTheRightType) {
  Array x = from_host<float>({1, 2}, {2});
  EXPECT_THAT(error_of([&] { x.item<float>(); }), HasSubstr("has 2 elements"));
  std::string text = error_of([&] { x.to_vector<int32_t>(); });
  EXPECT_THAT(text, HasSubstr("f32[2]"));
  EXPECT_THAT(text, HasSubstr("requested as i32"));
  EXPECT_THAT(text, HasSubstr("HINT:"));
  EXPECT_THAT(error_of([] {
                from_host<float>({1, 2, 3}, {2, 2});
              }),
              HasSubstr("3 values given for shape [2,2]"));
  EXPECT_THAT(error_of([] { exp(Array()); }), HasSubstr("empty Array"));
  // An absent Array's type is an error, not a null dereference.
  Array absent;
  EXPECT_FALSE(absent.defined());
  for (const auto& query : std::vector<std::function<void()>>{
           [&] { (void)absent.aval(); }, [&] { (void)absent.shape(); },
           [&] { (void)absent.dtype(); }, [&] { (void)absent.rank(); },
           [&] { (void)absent.size(); }, [&] { (void)absent.dim(0); },
           [&] { (void)absent.to_host(); }, [&] { (void)absent.item<float>(); },
           [&] { (void)absent.device(); }, [&] { absent.block_until_ready(); }}) {
    EXPECT_THAT(error_of(query), HasSubstr("empty"));
  }
}

TEST(Runtime, ConcurrentHostThreadsShareDevices) {
  std::vector<std::thread> threads;
  std::vector<float> results(4);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t, &results] {
      Array x = from_host<float>({1, 2, 3}, {3});
      Array y = x;
      for (int i = 0; i < 50; ++i) y = y + static_cast<double>(t);
      results[static_cast<size_t>(t)] = y.to_vector<float>()[0];
    });
  }
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(results[static_cast<size_t>(t)], 1.0f + 50.0f * t);
}

TEST(RuntimeFourDevices, DevicePutMovesDataAndOpsFollowIt) {
  require_four_devices();
  Array x = from_host<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(x.device().id(), 0);
  Array y = device_put(x, device(2));
  EXPECT_EQ(y.device().id(), 2);
  EXPECT_EQ(device_put(y, device(2)).impl(), y.impl());  // already there: no copy
  Array z = exp(y) * 2.0;
  EXPECT_EQ(z.device().id(), 2);
  std::vector<float> values = z.to_vector<float>();
  EXPECT_FLOAT_EQ(values[5], 2 * std::exp(6.0f));
  EXPECT_EQ(y.to_vector<float>(), x.to_vector<float>());
}

TEST(RuntimeFourDevices, PlacementViewNamesDeviceAndBytes) {
  require_four_devices();
  Array x = device_put(from_host<float>({1, 2, 3, 4, 5, 6}, {2, 3}), device(3));
  Placement where = placement(x);
  ASSERT_EQ(where.pieces.size(), 1u);
  EXPECT_EQ(where.pieces[0].device->id(), 3);
  EXPECT_EQ(where.pieces[0].bytes, 24);
  EXPECT_EQ(where.to_string(),
            "f32[2,3] (24 bytes) on 1 device(s), committed\n  cpu:3    [0:2, 0:3]  24 bytes");
}

TEST(RuntimeFourDevices, MixingCommittedDevicesIsAnErrorWithHint) {
  require_four_devices();
  Array a = device_put(from_host<float>({1, 2}, {2}), device(0));
  Array b = device_put(a, device(1));
  std::string text = error_of([&] { (void)(a + b); });
  EXPECT_THAT(text, HasSubstr("add: operands are committed to different devices"));
  EXPECT_THAT(text, HasSubstr("f32[2] on cpu:0"));
  EXPECT_THAT(text, HasSubstr("f32[2] on cpu:1"));
  EXPECT_THAT(text, HasSubstr("runtime_test.cc"));
  EXPECT_THAT(text, HasSubstr("HINT: move one operand first"));
}

TEST(RuntimeFourDevices, JitRunsOnItsArgumentsDeviceAndRefusesTwoDevices) {
  require_four_devices();
  auto f = [](const Array& x, const std::vector<Array>& ys) { return x * ys[1] + 1.0f; };
  auto jitted = jit(f);  // errors of its calls name this line
  Array placed = device_put(from_host<float>({1, 2}, {2}), device(2));
  Array loose = from_host<float>({10, 20}, {2});  // uncommitted: follows the committed one
  Array result = jitted(placed, std::vector<Array>{loose, loose});
  EXPECT_EQ(result.device().id(), 2);
  EXPECT_EQ(result.to_vector<float>(), (std::vector<float>{11, 41}));

  Array elsewhere = device_put(loose, device(1));
  std::string text = error_of([&] {
    (void)jitted(placed, std::vector<Array>{loose, elsewhere}).to_host();
  });
  EXPECT_THAT(text, HasSubstr("arguments are committed to different devices"));
  EXPECT_THAT(text, HasSubstr("argument 0 (f32[2]) on cpu:2"));
  EXPECT_THAT(text, HasSubstr("argument 1 leaf 1 (f32[2]) on cpu:1"));
  EXPECT_THAT(text, HasSubstr("runtime_test.cc"));
  EXPECT_THAT(text, HasSubstr("HINT: move them to one device first"));
}

TEST(RuntimeFourDevices, UncommittedOperandsFollowCommittedOnes) {
  require_four_devices();
  Array placed = device_put(from_host<float>({1, 2}, {2}), device(3));
  Array loose = from_host<float>({10, 20}, {2});  // uncommitted, on cpu:0
  Array sum = placed + loose;
  EXPECT_EQ(sum.device().id(), 3);
  EXPECT_TRUE(placement(sum).committed);
  EXPECT_EQ(sum.to_vector<float>(), (std::vector<float>{11, 22}));
  EXPECT_EQ(device_of(sum), &device(3));
  EXPECT_EQ(device_of(loose), nullptr);
}

TEST(RuntimeFourDevices, DefaultDeviceScopePlacesNewArrays) {
  require_four_devices();
  {
    DefaultDeviceScope scope(device(2));
    EXPECT_EQ(from_host<float>({1}, {1}).device().id(), 2);
    EXPECT_EQ(scalar(3.0).device().id(), 2);
  }
  EXPECT_EQ(from_host<float>({1}, {1}).device().id(), 0);
}

TEST(RuntimeFourDevices, DevicePutWaitsForItsSourceAndCarriesErrors) {
  require_four_devices();
  Array a = from_host<int32_t>({1, 2}, {2});
  Array bad = a / from_host<int32_t>({0, 1}, {2});
  Array moved = device_put(bad, device(3));
  EXPECT_THAT(error_of([&] { moved.block_until_ready(); }), HasSubstr("integer division by zero"));
  // Many chained moves across all devices arrive intact.
  Array x = from_host<float>({1, 2, 3}, {3});
  for (int hop = 0; hop < 40; ++hop) x = device_put(x + 1.0, device(hop % 4));
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{41, 42, 43}));
}

}  // namespace
}  // namespace kiln
