// `kiln bench ops` (see bench_ops.h). Every figure is synchronized; A and B alternate so
// that a noisy neighbour hits both; ratios are taken pair by pair and their median is
// reported next to the medians of each side.
#include "cli/bench_ops.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "base/compute_pool.h"
#include "kernels/cpu/gemm.h"
#include "kiln/device.h"
#include "kiln/ops.h"
#include "kiln/profile.h"
#include "profile/bandwidth.h"

namespace kiln::cli {
namespace {

using profile::median;
using PairedTimes = profile::Alternation;

// Alternates a and b `pairs` times (after one warm-up call each). Each sample is preceded
// by a 20 ms pause, so that threads spinning after the previous sample are idle.
PairedTimes alternate(int pairs, const std::function<void()>& a, const std::function<void()>& b) {
  profile::AlternateOptions options;
  options.rounds = pairs;
  options.pause_s = 0.020;
  return profile::alternate(a, b, options);
}

Array random_array(Shape shape, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> values(static_cast<size_t>(shape.num_elements()));
  for (float& value : values) value = uniform(rng);
  return from_host(values, std::move(shape));
}

void bench_dot(const BenchOpsOptions& options, int pairs) {
  fmt::print("\n## dot_general f32 vs the chosen BLAS's sgemm called directly (GFLOP/s)\n");
  fmt::print("{:<26} {:>12} {:>14} {:>22}\n", "(M x K)(K x N)", "kiln", "direct sgemm",
             "ratio (median of pairs)");
  struct Case {
    int64_t m, k, n;
  };
  std::vector<Case> cases{{128, 784, 512}, {512, 512, 512}, {2048, 2048, 2048}};
  if (options.quick) cases = {{128, 784, 512}, {256, 256, 256}};
  for (const Case& c : cases) {
    Array a = random_array(Shape{c.m, c.k}, 11);
    Array b = random_array(Shape{c.k, c.n}, 12);
    std::vector<float> host_a = a.to_vector<float>(), host_b = b.to_vector<float>();
    std::vector<float> host_c(static_cast<size_t>(c.m * c.n));
    GemmDims dims{.m = c.m, .n = c.n, .k = c.k, .lda = c.k, .ldb = c.n, .ldc = c.n};
    // Products are timed in back-to-back batches of about 2 GFLOP, as a training loop runs
    // them, so that one sample is tens of milliseconds and start-up latency is amortised.
    int batch =
        static_cast<int>(std::max<int64_t>(1, int64_t{2'000'000'000} / (2 * c.m * c.n * c.k)));
    auto kiln_dot = [&] {
      Array out;
      for (int i = 0; i < batch; ++i) out = matmul(a, b);
      out.block_until_ready();
    };
    auto direct = [&] {
      for (int i = 0; i < batch; ++i)
        sgemm_direct(dims, host_a.data(), host_b.data(), host_c.data());
    };
    PairedTimes times = alternate(pairs, kiln_dot, direct);
    double flop = 2.0 * static_cast<double>(c.m * c.n * c.k) * batch;
    fmt::print("{:<26} {:>12.1f} {:>14.1f} {:>22.2f}\n",
               fmt::format("({}x{})({}x{})", c.m, c.k, c.k, c.n), flop / median(times.a_s) / 1e9,
               flop / median(times.b_s) / 1e9, times.median_ratio());
  }
}

void bench_elementwise(const BenchOpsOptions& options, int pairs) {
  int64_t n = options.quick ? int64_t{1} << 20 : options.elements;
  fmt::print("\n## Elementwise bandwidth over {} f32 (GB/s = bytes moved / time, 1e9)\n", n);
  Array a = random_array(Shape{n}, 1);
  Array b = random_array(Shape{n}, 2);
  std::vector<float> host_a(static_cast<size_t>(n), 1.0f), host_b(static_cast<size_t>(n), 2.0f),
      host_c(static_cast<size_t>(n), 0.0f);
  ComputePool& pool = compute_pool();
  auto stream = [&] { profile::stream_add(host_a.data(), host_b.data(), host_c.data(), n, pool); };
  auto kiln_add = [&] { add(a, b).block_until_ready(); };
  auto kiln_exp = [&] { exp(a).block_until_ready(); };
  double add_bytes = 3.0 * 4 * static_cast<double>(n), exp_bytes = 2.0 * 4 * static_cast<double>(n);
  PairedTimes add_pairs = alternate(pairs, kiln_add, stream);
  PairedTimes exp_pairs = alternate(pairs, kiln_exp, stream);
  auto gbps = [](double bytes, const std::vector<double>& times) {
    return bytes / median(times) / 1e9;
  };
  // exp moves 2/3 of add's bytes, so its ratio compares bandwidths, not times.
  std::vector<double> exp_ratios;
  for (size_t i = 0; i < exp_pairs.a_s.size(); ++i) {
    exp_ratios.push_back((exp_bytes / exp_pairs.a_s[i]) / (add_bytes / exp_pairs.b_s[i]));
  }
  fmt::print("{:<24} {:>12} {:>26}\n", "", "median GB/s", "ratio to STREAM add (pairs)");
  fmt::print("{:<24} {:>12.1f} {:>26}\n", "STREAM add (c = a + b)", gbps(add_bytes, add_pairs.b_s),
             "1.00");
  fmt::print("{:<24} {:>12.1f} {:>26.2f}\n", "kiln add", gbps(add_bytes, add_pairs.a_s),
             add_pairs.median_ratio());
  fmt::print("{:<24} {:>12.1f} {:>26.2f}\n", "kiln exp", gbps(exp_bytes, exp_pairs.a_s),
             median(exp_ratios));
}

void bench_transpose(const BenchOpsOptions& options, int pairs) {
  fmt::print(
      "\n## transpose f32 vs a STREAM copy of the same bytes (GB/s = 2 x bytes / time, 1e9)\n");
  fmt::print("{:<34} {:>12} {:>14} {:>26}\n", "shape -> permutation", "kiln GB/s", "STREAM copy",
             "ratio to STREAM (pairs)");
  struct Case {
    Shape shape;
    Dims permutation;
  };
  // GPT-2 124M's tied projection (the token table both ways), a square matrix, and
  // attention's two layout changes at B = 4, T = 256, 12 heads of 64.
  std::vector<Case> cases{{Shape{50304, 768}, {1, 0}},
                          {Shape{768, 50304}, {1, 0}},
                          {Shape{4096, 4096}, {1, 0}},
                          {Shape{4, 256, 12, 64}, {0, 2, 1, 3}},
                          {Shape{4, 12, 256, 64}, {0, 1, 3, 2}}};
  if (options.quick) cases = {{Shape{1000, 768}, {1, 0}}, {Shape{4, 64, 12, 64}, {0, 1, 3, 2}}};
  ComputePool& pool = compute_pool();
  for (const Case& c : cases) {
    Array x = random_array(c.shape, 21);
    int64_t n = c.shape.num_elements();
    std::vector<float> host_a(static_cast<size_t>(n), 1.0f), host_c(static_cast<size_t>(n));
    auto kiln_transpose = [&] { transpose(x, c.permutation).block_until_ready(); };
    auto stream = [&] { profile::stream_copy(host_a.data(), host_c.data(), n, pool); };
    PairedTimes times = alternate(pairs, kiln_transpose, stream);
    double bytes = 2.0 * 4 * static_cast<double>(n);
    std::string perm;
    for (int64_t axis : c.permutation) perm += fmt::format("{}{}", perm.empty() ? "" : ",", axis);
    fmt::print("{:<34} {:>12.1f} {:>14.1f} {:>26.2f}\n",
               fmt::format("{} -> ({})", c.shape.to_string(), perm),
               bytes / median(times.a_s) / 1e9, bytes / median(times.b_s) / 1e9,
               times.median_ratio());
  }
}

void bench_dispatch(const BenchOpsOptions& options) {
  int ops = options.quick ? 2000 : 20000;
  fmt::print("\n## Eager dispatch overhead (1-element f32 arrays, {} chained adds)\n", ops);
  Array one = from_host<float>({1.0f}, {1});
  std::vector<double> per_op;
  for (int round = 0; round < (options.quick ? 3 : 7); ++round) {
    Array x = from_host<float>({0.0f}, {1});
    double start = profile::now_seconds();
    for (int i = 0; i < ops; ++i) x = add(x, one);
    x.block_until_ready();
    per_op.push_back((profile::now_seconds() - start) / ops);
    if (round == 0 && x.item<float>() != static_cast<float>(ops)) {
      fmt::print("  wrong result {}\n", x.item<float>());
    }
  }
  std::vector<double> round_trip;
  Array x = from_host<float>({0.0f}, {1});
  for (int i = 0; i < (options.quick ? 200 : 2000); ++i) {
    double start = profile::now_seconds();
    x = add(x, one);
    x.block_until_ready();
    round_trip.push_back(profile::now_seconds() - start);
  }
  fmt::print("{:<44} {:>8.2f} us\n", "per op, queued back to back (median of rounds)",
             median(per_op) * 1e6);
  fmt::print("{:<44} {:>8.2f} us\n", "per op, waiting for each (dispatch + wake-up)",
             median(round_trip) * 1e6);
}

void bench_sync(const BenchOpsOptions& options, int pairs) {
  int64_t n = options.quick ? int64_t{1} << 18 : int64_t{1} << 22;
  fmt::print("\n## Timing without and with synchronization (chain of 8 ops over {} f32)\n", n);
  Array x = random_array(Shape{n}, 3);
  auto chain = [&] {
    Array y = exp(x);
    for (int i = 0; i < 3; ++i) y = tanh(y * 0.5 + x);
    return y;
  };
  std::vector<double> unsynced, synced;
  chain().block_until_ready();
  for (int i = 0; i < pairs; ++i) {
    double start = profile::now_seconds();
    Array y = chain();
    unsynced.push_back(profile::now_seconds() - start);
    y.block_until_ready();
    synced.push_back(profile::now_seconds() - start);
  }
  fmt::print("{:<44} {:>10.3f} ms\n", "unsynchronized (time until the calls return)",
             median(unsynced) * 1e3);
  fmt::print("{:<44} {:>10.3f} ms\n", "synchronized (until the result is ready)",
             median(synced) * 1e3);
  fmt::print("unsynchronized timing under-reports the real cost {:.0f}x\n",
             median(synced) / median(unsynced));
}

}  // namespace

int run_bench_ops(const BenchOpsOptions& options) {
  int pairs = options.quick ? 3 : options.repeats;
  fmt::print("# kiln bench ops: {} device(s), compute pool of {} thread(s), {} A/B pairs each\n",
             devices().size(), compute_pool().num_threads(), pairs);
  auto selected = [&](const char* section) {
    return options.only.empty() || options.only == section;
  };
  if (selected("dot")) bench_dot(options, pairs);
  if (selected("elementwise")) bench_elementwise(options, pairs);
  if (selected("transpose")) bench_transpose(options, pairs);
  if (selected("dispatch")) bench_dispatch(options);
  if (selected("sync")) bench_sync(options, pairs);
  return 0;
}

}  // namespace kiln::cli
