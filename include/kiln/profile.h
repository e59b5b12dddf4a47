// Honest timing. Asynchronous dispatch makes naive timers lie: an op returns before its
// kernel has run. kiln::profile::time synchronizes after every call, reports the first
// call apart from the steady state (it pays for allocation, cold caches and, later,
// compilation), and summarises the repeats with median, p10 and p90.
//
//   auto timing = kiln::profile::time([&] { return kiln::exp(x) * 2.0; }, {.repeats = 50});
//   std::cout << timing.to_string();   // "first 1.92 ms; median 0.41 ms (p10 0.40, p90 0.47) over
//   50"
#pragma once

#include <chrono>
#include <string>
#include <type_traits>
#include <vector>

#include "kiln/array.h"
#include "kiln/device.h"

namespace kiln::profile {

struct TimingOptions {
  int warmup = 2;    // steady-state calls run and discarded after the first call
  int repeats = 20;  // timed steady-state calls
};

struct Timing {
  double first_call_s = 0;
  std::vector<double> samples_s;  // in call order
  double median_s = 0;
  double p10_s = 0;
  double p90_s = 0;
  double mean_s = 0;
  std::string to_string() const;
};

// Summary statistics of `samples` (nearest-rank percentiles).
Timing summarize(double first_call_s, std::vector<double> samples);

double now_seconds();

// Waits for whatever `result` holds: an Array, a container of Arrays, or nothing (then
// every device is synchronized).
template <typename T>
void wait_for(const T& result) {
  if constexpr (std::is_same_v<T, Array>) {
    result.block_until_ready();
  } else {
    for (const Array& array : result) array.block_until_ready();
  }
}

template <typename Fn>
Timing time(Fn&& fn, TimingOptions options = {}) {
  auto timed_call = [&]() {
    double start = now_seconds();
    if constexpr (std::is_void_v<std::invoke_result_t<Fn&>>) {
      fn();
      synchronize_all();
    } else {
      wait_for(fn());
    }
    return now_seconds() - start;
  };
  double first = timed_call();
  for (int i = 0; i < options.warmup; ++i) timed_call();
  std::vector<double> samples;
  for (int i = 0; i < options.repeats; ++i) samples.push_back(timed_call());
  return summarize(first, std::move(samples));
}

}  // namespace kiln::profile
