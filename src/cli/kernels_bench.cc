// `kiln kernels bench` (kernels_bench.h): the kernel compiled (both sides jitted) or in
// interpret mode (both eager: what a host copy per block and an eager dispatch per
// operation cost; docs/kernels.md) against the unfused program. Bytes count each input read once
// and each output written once, the least any implementation moves; FLOPs count multiply-adds as
// two.
#include "cli/kernels_bench.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/compute_pool.h"
#include "kiln/array_functions.h"
#include "kiln/device.h"
#include "kiln/grad.h"
#include "kiln/jit.h"
#include "kiln/nn/functional.h"
#include "kiln/ops.h"
#include "kiln/pallas.h"
#include "kiln/profile.h"
#include "kiln/random.h"
#include "kiln/tracing.h"
#include "pallas/kernel_call.h"
#include "pallas/kernel_checks.h"
#include "profile/machine.h"
#include "train/progress.h"

namespace kiln::cli {
namespace {

struct Workload {
  std::string inputs;  // "f32 512x512 @ 512x512"
  double bytes = 0;    // inputs read once, outputs written once
  double flops = 0;    // 0: a memory-bound kernel
  std::vector<Array> args;
  using Program = std::function<Array(const std::vector<Array>&)>;
  Program kernel;
  Program unfused;
};

Array normal(uint64_t seed, Shape shape) {
  return random::normal(random::key(seed), std::move(shape));
}

// Causal attention over [heads, T, D] as a user writes it with kiln's ops (the row's maximum
// held constant for autodiff): the unfused program of both attention workloads.
Array causal_attention(const Array& q, const Array& k, const Array& v) {
  const int64_t t = q.shape()[1], d = q.shape()[2];
  Array scores = matmul(q, swapaxes(k, 1, 2)) / std::sqrt(static_cast<double>(d));
  Array later = greater(iota(Shape({t, t}), DType::i32, 1), iota(Shape({t, t}), DType::i32, 0));
  scores = where(later, full(Shape({t, t}), -1e30), scores);
  Array e = exp(scores - stop_gradient(max(scores, {2}, true)));
  return matmul(e / sum(e, {2}, true), v);
}

Workload workload(const KernelBenchOptions& options) {
  const std::string& name = options.name;
  const bool quick = options.quick;
  // The row kernels' rows per grid point (absent: the kernels' own default).
  const int64_t block_rows =
      options.blocks.size() == 1 ? options.blocks[0] : pallas::kAutoBlockRows;
  auto rows_text = [block_rows](int64_t n) {
    const int64_t rows =
        block_rows == pallas::kAutoBlockRows ? pallas::auto_block_rows(n) : block_rows;
    return fmt::format("{} row{} a block{}", rows, rows == 1 ? "" : "s",
                       block_rows == pallas::kAutoBlockRows ? " (the default)" : "");
  };
  Workload w;
  if (name == "matmul") {
    int64_t n = options.size > 0 ? options.size : quick ? 128 : 512;
    Array a = normal(1, {n, n}), b = normal(2, {n, n});
    pallas::MatmulBlocks blocks;
    if (!options.blocks.empty()) blocks = {options.blocks[0], options.blocks[1], options.blocks[2]};
    w.inputs =
        fmt::format("f32 {0}x{0} @ {0}x{0}, blocks {1}x{2}x{3}", n, blocks.m, blocks.n, blocks.k);
    w.bytes = 3.0 * 4 * static_cast<double>(n * n);
    w.flops = 2.0 * static_cast<double>(n * n * n);
    w.args = {a, b};
    w.kernel = [blocks](const std::vector<Array>& x) { return pallas::matmul(x[0], x[1], blocks); };
    w.unfused = [](const std::vector<Array>& x) { return matmul(x[0], x[1]); };
  } else if (name == "softmax") {
    int64_t rows = quick ? 64 : 4096, n = quick ? 128 : 1024;
    Array x = normal(3, {rows, n});
    w.inputs = fmt::format("f32 {}x{}, {}", rows, n, rows_text(n));
    w.bytes = 2.0 * 4 * static_cast<double>(rows * n);
    w.args = {x};
    w.kernel = [block_rows](const std::vector<Array>& in) {
      return pallas::softmax(in[0], block_rows);
    };
    w.unfused = [](const std::vector<Array>& in) {
      Array e = exp(in[0] - max(in[0], {1}, true));
      return e / sum(e, {1}, true);
    };
  } else if (name == "layer_norm") {
    int64_t rows = quick ? 64 : 4096, n = quick ? 128 : 768;
    Array x = normal(4, {rows, n}), scale = normal(5, {n}), bias = normal(6, {n});
    w.inputs = fmt::format("f32 {}x{}, {}", rows, n, rows_text(n));
    w.bytes = 2.0 * 4 * static_cast<double>(rows * n);
    w.args = {x, scale, bias};
    w.kernel = [block_rows](const std::vector<Array>& in) {
      return pallas::layer_norm(in[0], in[1], in[2], 1e-5, block_rows);
    };
    w.unfused = [](const std::vector<Array>& in) {
      return nn::layer_norm(in[0], in[1], in[2], 1e-5);
    };
  } else if (name == "softmax_cross_entropy") {
    int64_t rows = quick ? 16 : 256, n = quick ? 1000 : 50304;
    Array logits = normal(7, {rows, n});
    Array labels = random::randint(random::key(8), Shape({rows}), 0, n);
    w.inputs = fmt::format("f32 {}x{}{}, {}", rows, n,
                           n == 50304 ? " (GPT-2's padded vocabulary)" : "", rows_text(n));
    w.bytes = 4.0 * static_cast<double>(rows * n + 2 * rows);
    w.args = {logits, labels};
    w.kernel = [block_rows](const std::vector<Array>& in) {
      return pallas::softmax_cross_entropy(in[0], in[1], block_rows);
    };
    w.unfused = [](const std::vector<Array>& in) {
      Array shifted = in[0] - max(in[0], {1}, true);
      Array log_p = shifted - log(sum(exp(shifted), {1}, true));
      return -squeeze(take_along_axis(log_p, expand_dims(in[1], 1), 1), {1});
    };
  } else if (name == "softmax_cross_entropy_grad") {
    int64_t rows = quick ? 16 : 256, n = quick ? 1000 : 50304;
    Array logits = normal(12, {rows, n});
    Array labels = random::randint(random::key(13), Shape({rows}), 0, n);
    Array g = normal(14, {rows});
    w.inputs = fmt::format("f32 {}x{}{}, {}", rows, n,
                           n == 50304 ? " (GPT-2's padded vocabulary)" : "", rows_text(n));
    w.bytes = 4.0 * static_cast<double>(2 * rows * n + 2 * rows);
    w.args = {logits, labels, g};
    w.kernel = [block_rows](const std::vector<Array>& in) {
      return pallas::softmax_cross_entropy_grad(in[0], in[1], in[2], block_rows);
    };
    w.unfused = [rows, n](const std::vector<Array>& in) {
      Array e = exp(in[0] - max(in[0], {1}, true));
      Array onehot =
          astype(equal(iota(Shape({rows, n}), DType::i32, 1), expand_dims(in[1], 1)), DType::f32);
      return (e / sum(e, {1}, true) - onehot) * expand_dims(in[2], 1);
    };
  } else if (name == "flash_attention") {
    int64_t heads = quick ? 2 : 12, t = quick ? 128 : 1024, d = 64;
    Array q = normal(9, {heads, t, d}), k = normal(10, {heads, t, d}),
          v = normal(11, {heads, t, d});
    w.inputs = fmt::format("f32 {} heads x T {} x D {}, causal, blocks 64x64", heads, t, d);
    w.bytes = 4.0 * 4 * static_cast<double>(heads * t * d);
    // Causal: half the scores' and the weighted sums' multiply-adds.
    w.flops = 2.0 * 2 * static_cast<double>(heads * t * t * d) / 2;
    w.args = {q, k, v};
    w.kernel = [](const std::vector<Array>& in) {
      return pallas::flash_attention(in[0], in[1], in[2], true);
    };
    w.unfused = [](const std::vector<Array>& in) { return causal_attention(in[0], in[1], in[2]); };
  } else if (name == "flash_attention_grad") {
    int64_t heads = quick ? 2 : 12, t = quick ? 128 : 1024, d = 64;
    Array q = normal(15, {heads, t, d}), k = normal(16, {heads, t, d}),
          v = normal(17, {heads, t, d}), d_out = normal(18, {heads, t, d});
    w.inputs =
        fmt::format("f32 {} heads x T {} x D {}, causal, blocks 64x64; forward and backward (grad)",
                    heads, t, d);
    w.bytes = 7.0 * 4 * static_cast<double>(heads * t * d);
    // The forward (2 products), then dV, dP, dK and dQ (4 more): 6 causal products, the
    // least a forward and backward pass multiplies.
    w.flops = 6.0 * 2 * static_cast<double>(heads * t * t * d) / 2;
    w.args = {q, k, v, d_out};
    // Forward and backward, as training runs them: the gradients of sum(attention * d_out),
    // through the kernel's custom_vjp (the forward kernel, then the backward kernels from
    // its saved output and logsumexp) and through autodiff of the unfused program.
    auto gradients = [](Array (*attention)(const Array&, const Array&, const Array&)) {
      return [attention](const std::vector<Array>& in) {
        auto objective = [&](const Array& qq, const Array& kk, const Array& vv) {
          return sum(attention(qq, kk, vv) * in[3]);
        };
        auto [dq, dk, dv] = grad<0, 1, 2>(objective)(in[0], in[1], in[2]);
        return concatenate({dq, dk, dv}, 0);
      };
    };
    w.kernel = gradients([](const Array& qq, const Array& kk, const Array& vv) {
      return pallas::flash_attention(qq, kk, vv, true);
    });
    w.unfused = gradients(causal_attention);
  } else {
    fail(kUnknownSite, fmt::format("kiln kernels bench: no workload for the kernel '{}'", name),
         "every kernel of kiln kernels list needs one in src/cli/kernels_bench.cc");
  }
  return w;
}

// Where a CUDA device would be, for the refusal's message only.
bool cuda_device_present() {
  std::error_code ignored;
  return std::filesystem::exists("/dev/nvidia0", ignored) ||
         std::filesystem::exists("/proc/driver/nvidia/gpus", ignored);
}

}  // namespace

int run_kernel_bench(const KernelBenchOptions& options) {
  std::vector<std::string> names = pallas::kernel_names();
  if (std::find(names.begin(), names.end(), options.name) == names.end()) {
    fail(kUnknownSite, fmt::format("kiln kernels bench: no kernel named '{}'", options.name),
         fmt::format("the kernels: {}", fmt::join(names, ", ")));
  }
  if (options.device != "cpu") {
    // Never an estimate in place of a measurement: kiln's kernels have no lowering for any
    // device but the CPU, so there is nothing to time there.
    std::fprintf(stderr,
                 "kiln kernels bench: --device %s: not measured. kiln's kernels have no %s "
                 "lowering (they run on the CPU only), and this machine has %s; no figure is "
                 "printed for a device the kernel did not run on.\n",
                 options.device.c_str(), options.device.c_str(),
                 cuda_device_present() ? "a CUDA device" : "no CUDA device");
    return 2;
  }
  if (options.double_buffer && options.mode != "compiled") {
    std::fprintf(stderr,
                 "kiln kernels bench: --double-buffer compares two compiled runs; it cannot be "
                 "given with --mode %s\n",
                 options.mode.c_str());
    return 2;
  }
  const bool row_kernel = options.name == "softmax" || options.name == "layer_norm" ||
                          options.name.rfind("softmax_cross_entropy", 0) == 0;
  if (options.size > 0 && options.name != "matmul") {
    std::fprintf(stderr,
                 "kiln kernels bench: --size is matmul's (N x N @ N x N); %s has fixed inputs\n",
                 options.name.c_str());
    return 2;
  }
  const size_t blocks_expected = options.name == "matmul" ? 3 : row_kernel ? 1 : 0;
  if (!options.blocks.empty() && options.blocks.size() != blocks_expected) {
    std::fprintf(stderr, "kiln kernels bench: --blocks for %s: %s, got %zu value(s)\n",
                 options.name.c_str(),
                 blocks_expected == 3   ? "three, M,N,K"
                 : blocks_expected == 1 ? "one, the rows per block"
                                        : "its blocks are fixed",
                 options.blocks.size());
    return 2;
  }
  Workload w = workload(options);
  profile::MachinePeaks peaks = profile::machine_peaks(false, nullptr, options.quick);
  profile::AlternateOptions alternation;
  alternation.rounds = options.repeats;
  alternation.pause_s = 0.02;
  // Compiled: both sides jitted, as a user runs them (the kernel's variants are traced
  // and compiled once, on the first call). Interpret: both eager.
  const bool compiled = options.mode == "compiled";
  pallas::detail::ForcedMode mode(!compiled);
  std::function<Array()> kernel, unfused;
  if (options.double_buffer) {
    // The setting is read when the kernel step runs, so each side waits for its result
    // inside its own setting.
    auto buffered = [f = jit(w.kernel), args = w.args](bool on) mutable {
      pallas::detail::ForcedDoubleBuffer setting(on);
      Array result = f(args);
      result.block_until_ready();
      return result;
    };
    kernel = [buffered]() mutable { return buffered(true); };
    unfused = [buffered]() mutable { return buffered(false); };
  } else if (compiled) {
    kernel = [f = jit(w.kernel), args = w.args]() mutable { return f(args); };
    unfused = [f = jit(w.unfused), args = w.args]() mutable { return f(args); };
  } else {
    kernel = [&w] { return w.kernel(w.args); };
    unfused = [&w] { return w.unfused(w.args); };
  }
  profile::Alternation times = profile::alternate(kernel, unfused, alternation);
  // The allocator's peak over one more call of each, above what was live before it (the
  // result included): arrays, jit arenas and a compiled kernel's block buffers.
  auto peak_bytes = [](const std::function<Array()>& f) {
    Device& device = default_device();
    device.synchronize();
    const int64_t before = device.memory_stats().live_bytes;
    device.reset_peak_memory();
    f().block_until_ready();
    return device.memory_stats().peak_bytes - before;
  };
  const int64_t kernel_peak = peak_bytes(kernel), unfused_peak = peak_bytes(unfused);
  auto row = [&](const char* what, const std::vector<double>& seconds) {
    profile::Timing timing = profile::summarize(0, seconds);
    double median_s = timing.median_s;
    double gflops = w.flops / median_s / 1e9, gbs = w.bytes / median_s / 1e9;
    std::string rate = w.flops > 0
                           ? fmt::format("{:>8.1f} GFLOP/s ({:.1f}% of {:.0f})", gflops,
                                         100 * gflops / peaks.gemm_gflops, peaks.gemm_gflops)
                           : fmt::format("{:>8.2f} GB/s ({:.1f}% of {:.1f})", gbs,
                                         100 * gbs / peaks.bandwidth_gbs, peaks.bandwidth_gbs);
    return fmt::format("{:<30} {:>10.3f} ms {:>10.3f} {:>10.3f}   {}\n", what, median_s * 1e3,
                       timing.p10_s * 1e3, timing.p90_s * 1e3, rate);
  };
  std::string text = fmt::format(
      "# kiln kernels bench {}: {}\n# device: cpu, {} ({} target), {} compute thread(s); the "
      "kernel {} (docs/kernels.md)\n# roofline: kiln bench machine's {:.0f} "
      "GFLOP/s sgemm and {:.1f} GB/s triad ({})\n",
      options.name, w.inputs, peaks.cpu_model, peaks.simd_target, compute_pool().num_threads(),
      options.double_buffer ? "double-buffered against single-buffered, both jitted"
      : compiled            ? "compiled, both sides jitted"
                            : "in interpret mode, both sides eager",
      peaks.gemm_gflops, peaks.bandwidth_gbs, peaks.how);
  text += fmt::format("{:<30} {:>13} {:>10} {:>10}   {}\n", "", "median", "p10", "p90",
                      w.flops > 0 ? "achieved (of the sgemm peak)" : "achieved (of the triad)");
  const char* a_name = options.double_buffer ? "kernel, double-buffered" : "kernel";
  const char* b_name = options.double_buffer ? "kernel, single-buffered"
                       : compiled            ? "unfused program (jit)"
                                             : "unfused program (eager ops)";
  text += row(a_name, times.a_s);
  text += row(b_name, times.b_s);
  text +=
      fmt::format("{} per pair: {} (median {:.2f}x; above 1: the {} is faster)\n",
                  options.double_buffer ? "single-buffered / double-buffered" : "unfused / kernel",
                  profile::format_ratios(times.ratios()), times.median_ratio(),
                  options.double_buffer ? "double-buffered kernel" : "kernel");
  text += fmt::format(
      "peak memory of a call above the inputs (the device allocator's): {} {:.2f} MiB, {} "
      "{:.2f} MiB\n",
      a_name, static_cast<double>(kernel_peak) / (1 << 20), b_name,
      static_cast<double>(unfused_peak) / (1 << 20));
  train::print_best_effort(stdout, text);
  return 0;
}

}  // namespace kiln::cli
