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

// One synchronized call of `fn`, in seconds: what it returns is waited for (an Array, a
// container of Arrays), or every device when it returns nothing.
template <typename Fn>
double timed_call(Fn&& fn) {
  double start = now_seconds();
  if constexpr (std::is_void_v<std::invoke_result_t<Fn&>>) {
    fn();
    synchronize_all();
  } else {
    wait_for(fn());
  }
  return now_seconds() - start;
}

template <typename Fn>
Timing time(Fn&& fn, TimingOptions options = {}) {
  double first = timed_call(fn);
  for (int i = 0; i < options.warmup; ++i) timed_call(fn);
  std::vector<double> samples;
  for (int i = 0; i < options.repeats; ++i) samples.push_back(timed_call(fn));
  return summarize(first, std::move(samples));
}

// The median of `values` (of an even count, the upper of the two middle values).
double median(std::vector<double> values);

// Comparing A with B on a noisy machine: timed alternately, A, B, A, B, ..., so that slow
// drifts of the machine's speed reach both sides of each pair alike, and summarised by the
// ratio of each pair (not by a ratio of two medians).
//
//   auto pairs = kiln::profile::alternate([&] { return fused(x); }, [&] { return eager(x); });
//   fmt::print("eager/fused per round: {} (median {:.2f}x)\n",
//              kiln::profile::format_ratios(pairs.ratios()), pairs.median_ratio());
struct AlternateOptions {
  int rounds = 7;  // pairs of samples
  int calls = 1;   // calls per sample: a sample is the median of its calls
  // Sleep before each sample, so that threads spinning after the other side's last call
  // (kiln's pool for 100 us, libgomp's for longer) are idle and neither side pays for them.
  double pause_s = 0;
};

struct Alternation {
  std::vector<double> a_s, b_s;  // per round, seconds
  // b / a per round: how many times faster A is than B.
  std::vector<double> ratios() const;
  double median_ratio() const { return median(ratios()); }
};

// "1.02 0.98 1.10": values with two decimals, space-separated.
std::string format_ratios(const std::vector<double>& values);

void pause_for(double seconds);

// One warm-up call of each, then `rounds` pairs of samples.
template <typename A, typename B>
Alternation alternate(A&& a, B&& b, AlternateOptions options = {}) {
  auto sample = [&](auto& fn) {
    std::vector<double> calls;
    for (int i = 0; i < options.calls; ++i) {
      if (options.pause_s > 0) pause_for(options.pause_s);
      calls.push_back(timed_call(fn));
    }
    return median(std::move(calls));
  };
  timed_call(a);
  timed_call(b);
  Alternation result;
  for (int round = 0; round < options.rounds; ++round) {
    result.a_s.push_back(sample(a));
    result.b_s.push_back(sample(b));
  }
  return result;
}

}  // namespace kiln::profile
