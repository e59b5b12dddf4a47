// The GPT-2 train step written the natural way (kiln/nn/gpt2.h: take() embedding,
// softmax_cross_entropy, random::normal init, AdamW), timed phase by phase and set beside
// its GEMM-bound limit: the step's matrix products, each shape timed alone through kiln's
// GEMM in the same run, times how often the step runs it. Rounds alternate steps and the
// limit and the ratio is taken round by round (the machine is noisy).
//
//   build/release/bench/gpt2_step_bench                       # GPT-2 124M, B = 4, T = 64
//   build/release/bench/gpt2_step_bench --context 256 --rounds 3
//   build/release/bench/gpt2_step_bench --context 256 --remat blocks   (less memory)
//   build/release/bench/gpt2_step_bench --context 1024 --attention flash  (no [T, T] matrix)
//   build/release/bench/gpt2_step_bench --compare-tuned   (against a hand-tuned variant)
//   build/release/bench/gpt2_step_bench --layers 4 --heads 4 --channels 256 --vocab 256
//       --padded-vocab 256 --max-context 256                  (examples/gpt2_small.toml's model)
//
// Prints: eager and jitted init (seconds, the allocator's peak against the parameters'
// bytes), the step's compile time as JitStats reports it, the first steps' losses, and per
// round the median step, the GEMM limit and their ratio; --json ends with one JSON line.
// bench/gpt2_peers.py runs PyTorch and JAX on the same model beside it.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <sys/resource.h>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "base/compute_pool.h"
#include "base/trace_events.h"
#include "kernels/cpu/gemm.h"
#include "kiln/array_functions.h"
#include "kiln/device.h"
#include "kiln/grad.h"
#include "kiln/jit.h"
#include "kiln/nn/activations.h"
#include "kiln/nn/gpt2.h"
#include "kiln/ops.h"
#include "kiln/optim.h"
#include "kiln/profile.h"
#include "kiln/random.h"

using namespace kiln;

namespace {

using profile::median;

int64_t minor_faults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

double gib(int64_t bytes) {
  return static_cast<double>(bytes) / (1 << 30);
}

// One GEMM shape of the step and how many times a step runs it.
struct StepGemm {
  GemmDims dims;
  int64_t count = 1;
  std::vector<float> a, b, c;
};

StepGemm make_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, int64_t count) {
  StepGemm g;
  g.dims = GemmDims{trans_a, trans_b, m, n, k, trans_a ? m : k, trans_b ? k : n, n};
  g.count = count;
  g.a.assign(static_cast<size_t>(m * k), 0.5f);
  g.b.assign(static_cast<size_t>(k * n), 0.25f);
  g.c.assign(static_cast<size_t>(m * n), 0.0f);
  return g;
}

// A dense layer x[rows, in] @ w[in, out] in a train step: forward, dW = x^T dy, dX = dy w^T.
void add_dense(std::vector<StepGemm>& gemms, int64_t rows, int64_t in, int64_t out, int64_t count) {
  gemms.push_back(make_gemm(false, false, rows, out, in, count));
  gemms.push_back(make_gemm(true, false, in, out, rows, count));
  gemms.push_back(make_gemm(false, true, rows, in, out, count));
}

std::vector<StepGemm> step_gemms(const nn::Gpt2Config& config, int64_t batch, int64_t length) {
  int64_t rows = batch * length, c = config.channels, layers = config.layers;
  int64_t head = c / config.heads, attention_count = layers * batch * config.heads;
  std::vector<StepGemm> gemms;
  add_dense(gemms, rows, c, 3 * c, layers);
  add_dense(gemms, rows, c, c, layers);
  add_dense(gemms, rows, c, 4 * c, layers);
  add_dense(gemms, rows, 4 * c, c, layers);
  // Attention per (batch, head): scores q k^T [T, T] and y = p v [T, head] forward; their
  // gradients dq, dk, dp, dv backward.
  gemms.push_back(make_gemm(false, true, length, length, head, attention_count));
  gemms.push_back(make_gemm(false, false, length, head, length, attention_count));
  gemms.push_back(make_gemm(false, false, length, head, length, 2 * attention_count));
  gemms.push_back(make_gemm(false, true, length, length, head, attention_count));
  gemms.push_back(make_gemm(true, false, length, head, length, attention_count));
  // The tied output projection x @ wte^T.
  gemms.push_back(make_gemm(false, true, rows, config.padded_vocab_size, c, 1));
  gemms.push_back(make_gemm(true, false, config.padded_vocab_size, c, rows, 1));
  gemms.push_back(make_gemm(false, false, rows, c, config.padded_vocab_size, 1));
  return gemms;
}

double gemm_flops(const std::vector<StepGemm>& gemms) {
  double flops = 0;
  for (const StepGemm& g : gemms) {
    flops += 2.0 * static_cast<double>(g.dims.m * g.dims.n * g.dims.k * g.count);
  }
  return flops;
}

// The median of `repeats` calls of one GEMM shape through kiln's GEMM.
double time_gemm(StepGemm& g, int repeats) {
  ComputePool& pool = compute_pool();
  std::vector<double> samples;
  for (int i = 0; i < repeats; ++i) {
    double start = profile::now_seconds();
    gemm(pool, g.dims, g.a.data(), g.b.data(), g.c.data());
    samples.push_back(profile::now_seconds() - start);
  }
  return median(samples);
}

double time_gemms(std::vector<StepGemm>& gemms) {
  double total = 0;
  for (StepGemm& g : gemms) total += time_gemm(g, 3) * static_cast<double>(g.count);
  return total;
}

std::string gemm_label(const GemmDims& d) {
  return fmt::format("{}{} m={} n={} k={}", d.trans_a ? 'T' : 'N', d.trans_b ? 'T' : 'N', d.m, d.n,
                     d.k);
}

// --gemms-only: each GEMM shape of the step alone (median of 5 calls), one JSON line per
// shape (bench/gpt2_peers.py --gemms times XLA's dot_general on the same list).
int print_gemm_table(std::vector<StepGemm>& gemms, bool json) {
  double total = 0;
  for (StepGemm& g : gemms) {
    time_gemm(g, 1);  // warm: the pool's threads, the operands' pages
    double seconds = time_gemm(g, 5);
    double flops = 2.0 * static_cast<double>(g.dims.m * g.dims.n * g.dims.k);
    total += seconds * static_cast<double>(g.count);
    if (json) {
      fmt::print(
          "{{\"trans_a\": {}, \"trans_b\": {}, \"m\": {}, \"n\": {}, \"k\": {}, "
          "\"count\": {}, \"seconds\": {}}}\n",
          g.dims.trans_a, g.dims.trans_b, g.dims.m, g.dims.n, g.dims.k, g.count, seconds);
    } else {
      fmt::print("{:<32} x{:<4} {:8.3f} ms {:6.0f} GFLOP/s\n", gemm_label(g.dims), g.count,
                 seconds * 1e3, flops / seconds / 1e9);
    }
  }
  if (!json) fmt::print("GEMM limit of a step: {:.3f} s\n", total);
  return 0;
}

// The kernels of one traced call of `fn`, summed by name, largest first.
void print_breakdown(const std::function<void()>& fn) {
  trace::begin_recording();
  fn();
  trace::Recording recording = trace::end_recording();
  std::map<std::string, std::pair<double, int>> by_name;
  double total = 0;
  for (const trace::Event& event : recording.events) {
    if (event.phase != trace::Event::Phase::kComplete || event.category != "kernel") continue;
    auto& [seconds, count] = by_name[event.name];
    seconds += static_cast<double>(event.duration_ns) * 1e-9;
    ++count;
    total += static_cast<double>(event.duration_ns) * 1e-9;
  }
  std::vector<std::pair<std::string, std::pair<double, int>>> sorted(by_name.begin(),
                                                                     by_name.end());
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  fmt::print("one step: {:.3f} s of kernels in {:.3f} s\n", total,
             static_cast<double>(recording.duration_ns) * 1e-9);
  for (size_t i = 0; i < std::min<size_t>(sorted.size(), 30); ++i) {
    fmt::print("  {:8.1f} ms {:5.1f}% x{:<4} {}\n", 1e3 * sorted[i].second.first,
               100 * sorted[i].second.first / total, sorted[i].second.second, sorted[i].first);
  }
  std::vector<const trace::Event*> longest;
  for (const trace::Event& event : recording.events) {
    if (event.phase == trace::Event::Phase::kComplete && event.category == "kernel") {
      longest.push_back(&event);
    }
  }
  std::sort(longest.begin(), longest.end(),
            [](const auto* a, const auto* b) { return a->duration_ns > b->duration_ns; });
  fmt::print("the longest kernels:\n");
  for (size_t i = 0; i < std::min<size_t>(longest.size(), 12); ++i) {
    std::string args;
    for (const auto& [key, value] : longest[i]->args) args += fmt::format(" {}={}", key, value);
    fmt::print("  {:8.1f} ms {}{}\n", static_cast<double>(longest[i]->duration_ns) * 1e-6,
               longest[i]->name, args);
  }
}

// The same model written the way a user tuning for speed might: attention spelled out with
// einsum and a causal mask instead of nn::dot_product_attention, the tied projection as one
// dot_general contracting wte's feature axis instead of matmul with transpose(wte), and the
// loss as log_softmax and take_along_axis instead of nn::softmax_cross_entropy. The
// natural step should be within 5% of it (--compare-tuned).
Array tuned_dense(const Tree& layer, const Array& x) {
  return dot_general(x, layer["kernel"].leaf(), {x.rank() - 1}, {0}) + layer["bias"].leaf();
}

Array tuned_norm(const Tree& layer, const Array& x) {
  Array mu = mean(x, {-1}, true);
  Array centred = x - mu;
  Array var = mean(centred * centred, {-1}, true);
  return centred * rsqrt(var + 1e-5) * layer["scale"].leaf() + layer["bias"].leaf();
}

Array tuned_attention(const nn::Gpt2Config& config, const Tree& attn, const Array& x) {
  int64_t batch = x.dim(0), length = x.dim(1), c = config.channels, h = config.heads;
  Array qkv = reshape(tuned_dense(attn["c_attn"], x), Shape{batch, length, 3, h, c / h});
  auto part = [&](int64_t i) {
    return squeeze(slice(qkv, {0, 0, i, 0, 0}, {batch, length, i + 1, h, c / h}), {2});
  };
  Array q = part(0) * (1.0 / std::sqrt(static_cast<double>(c / h))), k = part(1), v = part(2);
  Array scores = einsum("bqhd,bkhd->bhqk", q, k);
  Array causal = greater_equal(iota(Shape{length, length}, DType::i32, 0),
                               iota(Shape{length, length}, DType::i32, 1));
  Array p = nn::softmax(where(causal, scores, full({}, -1e30)), -1);
  Array y = reshape(einsum("bhqk,bkhd->bqhd", p, v), Shape{batch, length, c});
  return tuned_dense(attn["c_proj"], y);
}

Array tuned_loss(const nn::Gpt2Config& config, const Tree& params, const Array& tokens,
                 const Array& targets) {
  int64_t length = tokens.dim(1);
  const Array& wte = params["wte"].leaf();
  Array x = take(wte, tokens, 0) + slice(params["wpe"].leaf(), {0, 0}, {length, config.channels});
  for (int64_t l = 0; l < config.layers; ++l) {
    const Tree& block = params["h"][l];
    x = x + tuned_attention(config, block["attn"], tuned_norm(block["ln_1"], x));
    Array hidden = nn::gelu(tuned_dense(block["mlp"]["c_fc"], tuned_norm(block["ln_2"], x)), true);
    x = x + tuned_dense(block["mlp"]["c_proj"], hidden);
  }
  x = tuned_norm(params["ln_f"], x);
  Array logits = dot_general(x, wte, {2}, {1});
  Array picked = take_along_axis(nn::log_softmax(logits, -1), expand_dims(targets, -1), -1);
  return -mean(picked);
}

}  // namespace

int main(int argc, char** argv) {
  nn::Gpt2Config config;
  int64_t batch = 4, length = 64;
  int rounds = 3, steps = 5;
  bool breakdown = false, json = false;
  CLI::App app{"GPT-2 train step (natural code) against its GEMM-bound limit"};
  app.add_option("--layers", config.layers, "transformer blocks")->capture_default_str();
  app.add_option("--heads", config.heads)->capture_default_str();
  app.add_option("--channels", config.channels)->capture_default_str();
  app.add_option("--vocab", config.vocab_size)->capture_default_str();
  app.add_option("--padded-vocab", config.padded_vocab_size)->capture_default_str();
  app.add_option("--max-context", config.max_context)->capture_default_str();
  std::string remat = "none";
  app.add_option("--remat", remat,
                 "what the backward pass recomputes: none, blocks, blocks_save_dots "
                 "(nn::Gpt2Remat)")
      ->check(CLI::IsMember({"none", "blocks", "blocks_save_dots"}))
      ->capture_default_str();
  std::string attention = "plain";
  app.add_option("--attention", attention,
                 "the blocks' attention: plain ([T, T] logits) or flash (pallas::flash_attention)")
      ->check(CLI::IsMember({"plain", "flash"}))
      ->capture_default_str();
  app.add_option("--batch", batch, "B")->capture_default_str();
  app.add_option("--context", length, "T, tokens per sequence")->capture_default_str();
  app.add_option("--rounds", rounds, "rounds of (steps, limit)")->capture_default_str();
  app.add_option("--steps", steps, "timed steps per round")->capture_default_str();
  bool compare_tuned = false;
  app.add_flag("--compare-tuned", compare_tuned,
               "also time a hand-tuned variant of the same step (einsum attention, the "
               "projection as one dot_general, log_softmax loss) in the same rounds");
  app.add_flag("--breakdown", breakdown,
               "trace one step and print where its time goes, kernel by kernel");
  app.add_flag("--json", json,
               "end with one JSON line: median step and GEMM limit over the rounds "
               "(bench/gpt2_peers.py reads it)");
  bool gemms_only = false;
  app.add_flag("--gemms-only", gemms_only,
               "time only the step's GEMM shapes, each alone, and print them one by one "
               "(with --json: one JSON line per shape)");
  CLI11_PARSE(app, argc, argv);
  if (gemms_only) {
    std::vector<StepGemm> gemms = step_gemms(config, batch, length);
    return print_gemm_table(gemms, json);
  }
  config.remat = remat == "blocks"             ? nn::Gpt2Remat::kBlocks
                 : remat == "blocks_save_dots" ? nn::Gpt2Remat::kBlocksSaveDots
                                               : nn::Gpt2Remat::kNone;
  config.attention = attention == "flash" ? nn::AttentionImplementation::kFlash
                                          : nn::AttentionImplementation::kPlain;

  Device* device = &default_device();
  fmt::print("{}, B = {}, T = {}, {} compute threads\n", config.to_string(), batch, length,
             device->compute_threads());

  // Init, eagerly (as a user first writes it), then under jit.
  device->reset_peak_memory();
  double start = profile::now_seconds();
  Tree params = nn::gpt2_init(config, random::key(0));
  for (const Array& leaf : params.leaves()) leaf.block_until_ready();
  double eager_init_s = profile::now_seconds() - start;
  int64_t param_bytes = params.size_bytes();
  fmt::print("init, eager: {:.2f} s, peak {:.2f} GiB for {:.2f} GiB of parameters ({} M)\n",
             eager_init_s, gib(device->memory_stats().peak_bytes), gib(param_bytes),
             param_bytes / 4 / 1000000);
  params = Tree();
  device->reset_peak_memory();
  auto init = jit([&](const Array& key) { return nn::gpt2_init(config, key); });
  start = profile::now_seconds();
  params = init(random::key(0));
  for (const Array& leaf : params.leaves()) leaf.block_until_ready();
  fmt::print("init, jit: {:.2f} s (compile {:.2f} s), peak {:.2f} GiB\n",
             profile::now_seconds() - start, init.stats().compile_seconds,
             gib(device->memory_stats().peak_bytes));

  optim::GradientTransformation optimizer = optim::adamw(3e-4, 0.0);
  Tree opt_state = optimizer.init(params);
  auto loss_fn = [&](const Tree& p, const Array& tokens, const Array& targets) {
    return nn::gpt2_loss(config, p, tokens, targets);
  };
  auto step = jit(
      [&](const Tree& p, const Tree& state, const Array& tokens, const Array& targets) {
        auto [loss, grads] = value_and_grad(loss_fn)(p, tokens, targets);
        auto [updates, new_state] = optimizer.update(grads, state, p);
        return std::make_tuple(optim::apply_updates(p, updates), new_state, loss);
      },
      JitOptions().named("gpt2_step").donating({0, 1}));
  Array data =
      random::randint(random::key(1), Shape{batch, length + 1}, 0, config.vocab_size, DType::i32);
  Array tokens = slice(data, {0, 0}, {batch, length});
  Array targets = slice(data, {0, 1}, {batch, length + 1});

  auto one_step = [&] {
    auto [p, s, loss] = step(params, opt_state, tokens, targets);
    params = std::move(p);
    opt_state = std::move(s);
    return loss;
  };
  device->reset_peak_memory();
  start = profile::now_seconds();
  float first_loss = one_step().item<float>();
  double first_step_s = profile::now_seconds() - start;
  fmt::print("first step: {:.2f} s (compile {:.2f} s), loss {:.6f}\n", first_step_s,
             step.stats().compile_seconds, first_loss);

  MemoryPlanReport plan = step.compile(params, opt_state, tokens, targets).memory_plan();
  fmt::print("memory plan: {}\n", plan.to_string());
  fmt::print("donations unusable: {}\n", step.stats().donations_unusable);
  if (breakdown) print_breakdown([&] { one_step().block_until_ready(); });

  // The hand-tuned step on its own copy of the state, so both run the same updates.
  Tree tuned_params = tree_map([](const Array& x) { return x + 0.0f; }, params);
  Tree tuned_state = optimizer.init(tuned_params);
  auto tuned_step = jit(
      [&](const Tree& p, const Tree& state, const Array& t, const Array& y) {
        auto [loss, grads] =
            value_and_grad([&](const Tree& q) { return tuned_loss(config, q, t, y); })(p);
        auto [updates, new_state] = optimizer.update(grads, state, p);
        return std::make_tuple(optim::apply_updates(p, updates), new_state, loss);
      },
      JitOptions().named("gpt2_tuned_step").donating({0, 1}));
  auto one_tuned_step = [&] {
    auto [p, s, loss] = tuned_step(tuned_params, tuned_state, tokens, targets);
    tuned_params = std::move(p);
    tuned_state = std::move(s);
    return loss;
  };
  if (compare_tuned) {
    float natural = nn::gpt2_loss(config, params, tokens, targets).item<float>();
    float tuned = tuned_loss(config, params, tokens, targets).item<float>();
    fmt::print("hand-tuned variant: loss {:.6f} (natural {:.6f}); first step {:.2f} s\n", tuned,
               natural, [&] {
                 double t0 = profile::now_seconds();
                 one_tuned_step().block_until_ready();
                 return profile::now_seconds() - t0;
               }());
  }
  std::vector<double> tuned_ratios;

  std::vector<StepGemm> gemms = step_gemms(config, batch, length);
  double flops = gemm_flops(gemms);
  std::vector<double> ratios, step_seconds, limit_seconds;
  for (int round = 0; round < rounds; ++round) {
    std::vector<double> samples;
    float loss = 0;
    int64_t system_before = device->memory_stats().system_allocations;
    int64_t faults_before = minor_faults();
    for (int i = 0; i < steps; ++i) {
      start = profile::now_seconds();
      loss = one_step().item<float>();
      samples.push_back(profile::now_seconds() - start);
    }
    double step_s = median(samples);
    double system_per_step =
        static_cast<double>(device->memory_stats().system_allocations - system_before) / steps;
    double faults_per_step = static_cast<double>(minor_faults() - faults_before) / steps;
    double limit_s = time_gemms(gemms);
    if (compare_tuned) {
      std::vector<double> tuned_samples;
      for (int i = 0; i < steps; ++i) {
        double t0 = profile::now_seconds();
        one_tuned_step().block_until_ready();
        tuned_samples.push_back(profile::now_seconds() - t0);
      }
      tuned_ratios.push_back(step_s / median(tuned_samples));
      fmt::print("round {}: hand-tuned step {:.3f} s, natural / tuned {:.3f}\n", round,
                 median(tuned_samples), tuned_ratios.back());
    }
    ratios.push_back(step_s / limit_s);
    step_seconds.push_back(step_s);
    limit_seconds.push_back(limit_s);
    fmt::print(
        "round {}: step {:.3f} s ({:.0f} GFLOP/s of matmul), GEMM limit {:.3f} s "
        "({:.0f} GFLOP/s), step/limit {:.2f}, loss {:.6f}; per step: {:.0f} allocations "
        "from the OS, {:.0f} minor page faults\n",
        round, step_s, flops / step_s / 1e9, limit_s, flops / limit_s / 1e9, step_s / limit_s, loss,
        system_per_step, faults_per_step);
  }
  // The allocator's peak holds the step's arguments (params, optimizer state, batch), its
  // arena and its outputs: what the plan's peak counts, measured.
  fmt::print(
      "peak {:.2f} GiB over the steps (planned {:.2f} GiB, intermediates {:.2f} GiB); "
      "step/limit median {:.2f} ({})\n",
      gib(device->memory_stats().peak_bytes), gib(plan.peak_bytes), gib(plan.temp_bytes),
      median(ratios), profile::format_ratios(ratios));
  if (compare_tuned) {
    fmt::print("natural / hand-tuned median {:.3f} ({})\n", median(tuned_ratios),
               profile::format_ratios(tuned_ratios));
  }
  if (json && !step_seconds.empty()) {
    fmt::print(
        "{{\"median_step_s\": {}, \"limit_s\": {}, \"first_step_s\": {}, \"peak_bytes\": {}, "
        "\"planned_peak_bytes\": {}}}\n",
        median(step_seconds), median(limit_seconds), first_step_s,
        device->memory_stats().peak_bytes, plan.peak_bytes);
  }
  return 0;
}
