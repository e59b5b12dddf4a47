// jit_bench: what kiln::jit buys, measured side by side in one run (docs/performance.md).
// The machine is noisy, so A and B alternate round by round and every ratio is taken
// pair by pair, then summarised by its median.
//
//   mlp      forward+backward of an MLP 784-512-512-10 at batch 128: jit vs eager, and the
//            step's eight GEMMs alone vs eager (the ceiling for any jit of the same GEMMs)
//   chain    8 elementwise ops over 16M floats: fused jit bandwidth vs STREAM add
//            (and vs the same chain run eagerly, one kernel per op)
//   compile  compile time of the MLP train step (trace + passes + planning)
//   remat    an 8-layer MLP with and without checkpoint: planned peak memory, step time
//   scan     grad of a recurrent cell under scan: residuals kept per step (the default)
//            vs ScanOptions::recompute: planned peak memory, step time; value_and_grad
//            vs grad (merge_scans runs their two forward loops as one)
//
//   jit_bench [--rounds R] [--only mlp|chain|compile|remat|scan]
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "base/compute_pool.h"
#include "kiln/checkpoint.h"
#include "kiln/control_flow.h"
#include "kiln/jit.h"
#include "kiln/ops.h"
#include "kiln/profile.h"
#include "kiln/random.h"
#include "profile/bandwidth.h"

namespace {

using namespace kiln;

using profile::Alternation;
using profile::format_ratios;
using profile::median;

Alternation alternate(int rounds, int calls, const std::function<void()>& a,
                      const std::function<void()>& b) {
  profile::AlternateOptions options;
  options.rounds = rounds;
  options.calls = calls;
  return profile::alternate(a, b, options);
}

Array normal(uint32_t seed, Shape shape, double scale) {
  return random::normal(random::key(seed), shape, DType::f32) * static_cast<float>(scale);
}

// ----- MLP ---------------------------------------------------------------------------------

std::vector<Array> mlp_params(const std::vector<int64_t>& widths, uint32_t seed) {
  std::vector<Array> params;
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    params.push_back(normal(seed + static_cast<uint32_t>(i), {widths[i], widths[i + 1]},
                            1.0 / std::sqrt(static_cast<double>(widths[i]))));
    params.push_back(zeros({widths[i + 1]}));
  }
  return params;
}

// Softmax cross-entropy of a ReLU MLP, written with plain ops.
Array mlp_loss(const std::vector<Array>& params, const Array& x, const Array& labels) {
  Array h = x;
  for (size_t i = 0; i < params.size(); i += 2) {
    h = matmul(h, params[i]) + params[i + 1];
    if (i + 2 < params.size()) h = maximum(h, scalar(0.0));
  }
  Array shifted = h - stop_gradient(max(h, {1}, true));
  Array log_probs = shifted - log(sum(exp(shifted), {1}, true));
  return -mean(sum(log_probs * labels, {1}));
}

void bench_mlp(int rounds) {
  fmt::print("\n## MLP 784-512-512-10, batch 128: forward + backward (value_and_grad)\n");
  std::vector<Array> params = mlp_params({784, 512, 512, 10}, 1);
  Array x = normal(100, {128, 784}, 1.0);
  Array labels =
      one_hot(astype(floor(random::uniform(random::key(7), {128}) * 10.0f), DType::i32), 10);
  auto eager_step = value_and_grad(mlp_loss);
  auto jit_step = jit(value_and_grad(mlp_loss), JitOptions().named("mlp_step"));
  auto run = [&](const auto& step) {
    return [&] {
      auto [loss, grads] = step(params, x, labels);
      loss.block_until_ready();
      for (const Array& g : grads) g.block_until_ready();
    };
  };
  Alternation pairs = alternate(rounds, 10, run(jit_step), run(eager_step));
  fmt::print("{:<10} {:>12} {:>12}   {}\n", "", "jit ms", "eager ms", "eager/jit per round");
  fmt::print("{:<10} {:>12.2f} {:>12.2f}   {}  (median {:.2f}x)\n", "step", median(pairs.a_s) * 1e3,
             median(pairs.b_s) * 1e3, format_ratios(pairs.ratios()), pairs.median_ratio());
  JitStats stats = jit_step.stats();
  fmt::print("jit compilations: {} (calls {}), compile {:.1f} ms\n", stats.compiles, stats.calls,
             stats.compile_seconds * 1e3);

  // The ceiling for any compiled step that runs the same GEMMs: the eight of them alone
  // (3 forward; dW and dX of the last two layers, dW of the first), compiled, against the
  // eager step. Whatever jit removes besides them, eager/jit cannot exceed eager/GEMMs.
  Array cotangent = normal(101, {128, 10}, 1.0);
  auto gemms_only = jit([](const std::vector<Array>& p, const Array& input, const Array& d3) {
    Array h1 = matmul(input, p[0]), h2 = matmul(h1, p[2]), h3 = matmul(h2, p[4]);
    Array dw3 = dot_general(h2, d3, {0}, {0});
    Array dh2 = dot_general(d3, p[4], {1}, {1});
    Array dw2 = dot_general(h1, dh2, {0}, {0});
    Array dh1 = dot_general(dh2, p[2], {1}, {1});
    Array dw1 = dot_general(input, dh1, {0}, {0});
    return std::vector<Array>{h3, dw3, dw2, dw1};
  });
  Alternation ceiling = alternate(
      rounds, 10,
      [&] {
        for (const Array& r : gemms_only(params, x, cotangent)) r.block_until_ready();
      },
      run(eager_step));
  fmt::print(
      "{:<10} {:>12.2f} {:>12.2f}   {}  (median {:.2f}x: the most any jit of these GEMMs "
      "can reach)\n",
      "GEMMs only", median(ceiling.a_s) * 1e3, median(ceiling.b_s) * 1e3,
      format_ratios(ceiling.ratios()), ceiling.median_ratio());
}

void bench_compile(int rounds) {
  fmt::print("\n## Compile time of the MLP train step (trace + passes + fusion + memory plan)\n");
  std::vector<Array> params = mlp_params({784, 512, 512, 10}, 1);
  Array x = normal(100, {128, 784}, 1.0);
  Array labels =
      one_hot(astype(floor(random::uniform(random::key(7), {128}) * 10.0f), DType::i32), 10);
  std::vector<double> seconds;
  for (int i = 0; i < std::max(rounds, 5); ++i) {
    auto step = jit(value_and_grad(mlp_loss));
    // The passes read small constants on the host, which waits for whatever is queued
    // before them (here: the random parameters); time the compiler alone.
    synchronize_all();
    double start = profile::now_seconds();
    Compiled compiled = step.compile(params, x, labels);
    seconds.push_back(profile::now_seconds() - start);
  }
  fmt::print("compile ms per round: {}  (median {:.1f} ms)\n", format_ratios([&] {
               std::vector<double> ms;
               for (double s : seconds) ms.push_back(s * 1e3);
               return ms;
             }()),
             median(seconds) * 1e3);
}

// ----- fused elementwise chain -------------------------------------------------------------

Array chain8(const Array& x) {
  Array y = x * 1.5f;
  y = y + 0.25f;
  y = maximum(y, scalar(0.0));
  y = y - 1.0f;
  y = abs(y);
  y = y * 0.5f;
  y = minimum(y, scalar(4.0));
  return neg(y);
}

void bench_chain(int rounds) {
  const int64_t n = int64_t{1} << 24;
  fmt::print(
      "\n## 8 elementwise ops over {} f32: bytes the fused loop must move = read + write "
      "({:.0f} MB); STREAM add moves 3 x 4 x n\n",
      n, 8.0 * static_cast<double>(n) / 1e6);
  Array x = normal(3, {n}, 1.0);
  auto fused = jit(chain8, JitOptions().named("chain8"));
  std::vector<float> a(static_cast<size_t>(n), 1.0f), b(static_cast<size_t>(n), 2.0f),
      c(static_cast<size_t>(n), 0.0f);
  ComputePool& pool = compute_pool();
  auto run_fused = [&] { fused(x).block_until_ready(); };
  auto run_stream = [&] { profile::stream_add(a.data(), b.data(), c.data(), n, pool); };
  auto run_eager = [&] { chain8(x).block_until_ready(); };
  Alternation vs_stream = alternate(rounds, 5, run_fused, run_stream);
  Alternation vs_eager = alternate(rounds, 3, run_fused, run_eager);
  const double chain_bytes = 8.0 * static_cast<double>(n);
  const double stream_bytes = 12.0 * static_cast<double>(n);
  std::vector<double> bandwidth_ratios;
  for (size_t i = 0; i < vs_stream.a_s.size(); ++i) {
    bandwidth_ratios.push_back((chain_bytes / vs_stream.a_s[i]) /
                               (stream_bytes / vs_stream.b_s[i]));
  }
  fmt::print(
      "fused jit: {:.1f} GB/s; STREAM add: {:.1f} GB/s; fused/STREAM bandwidth per round: "
      "{}  (median {:.2f})\n",
      chain_bytes / median(vs_stream.a_s) / 1e9, stream_bytes / median(vs_stream.b_s) / 1e9,
      format_ratios(bandwidth_ratios), median(bandwidth_ratios));
  fmt::print(
      "eager (8 kernels): {:.1f} ms; fused jit: {:.1f} ms; eager/jit per round: {}  "
      "(median {:.2f}x)\n",
      median(vs_eager.b_s) * 1e3, median(vs_eager.a_s) * 1e3, format_ratios(vs_eager.ratios()),
      vs_eager.median_ratio());
  fmt::print("steps: {}", fused.compile(x).steps_text());
}

// ----- rematerialisation -------------------------------------------------------------------

// Each layer is a residual block with a 4x wider hidden layer, h + tanh(h W_in) W_out:
// without checkpoint the backward pass keeps both wide intermediates of every layer; with
// checkpoint(save_nothing) only each block's input, recomputing the rest.
void bench_remat(int rounds) {
  const int64_t batch = 256, width = 512, hidden = 2048;
  fmt::print(
      "\n## 8 residual blocks {}->{}->{} at batch {}: grad with and without checkpoint "
      "(save_nothing per block)\n",
      width, hidden, width, batch);
  std::vector<Array> weights;
  for (uint32_t i = 0; i < 8; ++i) {
    weights.push_back(normal(10 + i, {width, hidden}, 1.0 / std::sqrt(double(width))));
    weights.push_back(normal(30 + i, {hidden, width}, 1.0 / std::sqrt(double(hidden))));
  }
  Array x = normal(99, {batch, width}, 1.0);
  auto block = [](const Array& h, const Array& w_in, const Array& w_out) {
    return h + matmul(tanh(matmul(h, w_in)), w_out);
  };
  auto remat_block = checkpoint(block, save_nothing());
  auto loss_plain = [&](const std::vector<Array>& ws, const Array& in) {
    Array h = in;
    for (size_t i = 0; i < ws.size(); i += 2) h = block(h, ws[i], ws[i + 1]);
    return mean(h * h);
  };
  auto loss_remat = [&](const std::vector<Array>& ws, const Array& in) {
    Array h = in;
    for (size_t i = 0; i < ws.size(); i += 2) h = remat_block(h, ws[i], ws[i + 1]);
    return mean(h * h);
  };
  auto plain = jit(grad(loss_plain), JitOptions().named("plain"));
  auto remat = jit(grad(loss_remat), JitOptions().named("remat"));
  MemoryPlanReport plain_plan = plain.compile(weights, x).memory_plan();
  MemoryPlanReport remat_plan = remat.compile(weights, x).memory_plan();
  auto run = [&](const auto& step) {
    return [&] {
      for (const Array& g : step(weights, x)) g.block_until_ready();
    };
  };
  Alternation pairs = alternate(rounds, 3, run(remat), run(plain));
  auto mib = [](int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); };
  fmt::print("{:<18} {:>16} {:>16} {:>12}\n", "", "peak MiB (plan)", "temps MiB", "step ms");
  fmt::print("{:<18} {:>16.1f} {:>16.1f} {:>12.2f}\n", "no checkpoint", mib(plain_plan.peak_bytes),
             mib(plain_plan.temp_bytes), median(pairs.b_s) * 1e3);
  fmt::print("{:<18} {:>16.1f} {:>16.1f} {:>12.2f}\n", "checkpoint", mib(remat_plan.peak_bytes),
             mib(remat_plan.temp_bytes), median(pairs.a_s) * 1e3);
  std::vector<double> slowdown;
  for (double r : pairs.ratios()) slowdown.push_back(1.0 / r);
  fmt::print("checkpoint/plain step time per round: {}  (median {:.2f})\n", format_ratios(slowdown),
             median(slowdown));
}

// ----- scan gradients ----------------------------------------------------------------------

// h_t = tanh(h_{t-1} W + x_t U) over T steps. By default the gradient's forward scan keeps
// each step's costly results (the products, tanh) and the backward scan replays only the
// cheap ops around them; with ScanOptions::recompute it keeps only the carry and runs each
// step's forward again (what every scan gradient did before 2026-12-01).
void bench_scan(int rounds) {
  const int64_t steps = 64, batch = 32, width = 256, inputs = 64;
  fmt::print("\n## grad of a tanh RNN cell under scan: {} steps, batch {}, {} -> {}\n", steps,
             batch, inputs, width);
  Array w = normal(50, {width, width}, 1.0 / std::sqrt(double(width)));
  Array u = normal(51, {inputs, width}, 1.0 / std::sqrt(double(inputs)));
  Array xs = normal(52, {steps, batch, inputs}, 1.0);
  Array h0 = zeros({batch, width});
  auto loss_with = [&](bool recompute) {
    return [&, recompute](const Array& w, const Array& u) {
      auto step = [&](const Array& h, const Array& x) {
        Array next = tanh(matmul(h, w) + matmul(x, u));
        return std::pair{next, mean(next * next)};
      };
      auto [h, ys] = scan(step, h0, xs, {.recompute = recompute});
      return mean(h) + sum(ys);
    };
  };
  auto kept = jit(grad(loss_with(false)), JitOptions().named("scan_kept"));
  auto recomputed = jit(grad(loss_with(true)), JitOptions().named("scan_recomputed"));
  MemoryPlanReport kept_plan = kept.compile(w, u).memory_plan();
  MemoryPlanReport recomputed_plan = recomputed.compile(w, u).memory_plan();
  auto run = [&](const auto& step) { return [&] { step(w, u).block_until_ready(); }; };
  Alternation pairs = alternate(rounds, 3, run(kept), run(recomputed));
  auto mib = [](int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); };
  fmt::print("{:<26} {:>16} {:>16} {:>12}\n", "", "peak MiB (plan)", "temps MiB", "step ms");
  fmt::print("{:<26} {:>16.1f} {:>16.1f} {:>12.2f}\n", "residuals kept (default)",
             mib(kept_plan.peak_bytes), mib(kept_plan.temp_bytes), median(pairs.a_s) * 1e3);
  fmt::print("{:<26} {:>16.1f} {:>16.1f} {:>12.2f}\n", "recompute = true",
             mib(recomputed_plan.peak_bytes), mib(recomputed_plan.temp_bytes),
             median(pairs.b_s) * 1e3);
  fmt::print("recompute/kept step time per round: {}  (median {:.2f}x)\n",
             format_ratios(pairs.ratios()), pairs.median_ratio());

  // value_and_grad traces the primal scan and the VJP's stacking scan; merge_scans runs
  // them as one loop, so asking for the loss as well should cost next to nothing.
  auto with_value = jit(value_and_grad(loss_with(false)), JitOptions().named("scan_value"));
  auto run_with_value = [&] {
    auto [value, gradient] = with_value(w, u);
    gradient.block_until_ready();
  };
  Alternation value_pairs = alternate(rounds, 3, run(kept), run_with_value);
  fmt::print("value_and_grad/grad step time per round: {}  (median {:.2f}x; {:.2f} vs {:.2f} ms)\n",
             format_ratios(value_pairs.ratios()), value_pairs.median_ratio(),
             median(value_pairs.b_s) * 1e3, median(value_pairs.a_s) * 1e3);
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 7;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--rounds" && i + 1 < argc) {
      rounds = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--only" && i + 1 < argc) {
      only = argv[++i];
    } else {
      fmt::print(stderr, "usage: jit_bench [--rounds R] [--only mlp|chain|compile|remat|scan]\n");
      return arg == "--help" ? 0 : 2;
    }
  }
  fmt::print("jit_bench: {} rounds, {} compute threads\n", rounds,
             kiln::compute_pool().num_threads());
  try {
    if (only.empty() || only == "mlp") bench_mlp(rounds);
    if (only.empty() || only == "compile") bench_compile(rounds);
    if (only.empty() || only == "chain") bench_chain(rounds);
    if (only.empty() || only == "remat") bench_remat(rounds);
    if (only.empty() || only == "scan") bench_scan(rounds);
  } catch (const kiln::Error& error) {
    fmt::print(stderr, "jit_bench: {}\n", error.what());
    return 1;
  }
  return 0;
}
