// Compiling does not wait for work already queued on the device: constant folding runs its
// few small kernels on the compiling thread (immediate_interpreter), so a compile that
// follows a long eager computation neither stalls behind it nor reports its time as
// compile time (GPT-2 124M reported 23-28 s for a 0.14 s compile).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "kiln/jit.h"
#include "kiln/ops.h"
#include "runtime/cpu_device.h"
#include "runtime/device_array.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(JitCompile, ConstantFoldingDoesNotWaitBehindTheDeviceQueue) {
  CpuDevice& device = cpu_device(default_device());
  // The device is busy until the test says otherwise.
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  device.enqueue([gate] { gate.wait(); });
  Array x = from_host<float>(std::vector<float>{1, 2, 3}, Shape{3});  // synchronous
  // A thread of its own rather than std::async: a thread that used kiln drains the device
  // queues when it exits, and std::async's future joins it.
  std::promise<std::pair<std::string, double>> result;
  std::future<std::pair<std::string, double>> compile = result.get_future();
  std::thread compiler([&] {
    auto f = [](const Array& v) { return v + sum(iota(Shape{8}, DType::f32) * 2.0f); };
    auto jitted = jit(f);
    Compiled compiled = jitted.compile(x);
    result.set_value({compiled.program().to_string(), jitted.stats().compile_seconds});
  });
  bool finished = compile.wait_for(std::chrono::seconds(60)) == std::future_status::ready;
  release.set_value();
  compiler.join();
  ASSERT_TRUE(finished) << "compiling waited for the device's queue";
  auto [program, seconds] = compile.get();
  EXPECT_THAT(program, Not(HasSubstr("iota"))) << "the constant was not folded:\n" << program;
  EXPECT_GT(seconds, 0.0);
}

}  // namespace
}  // namespace kiln
