// kiln::jit through the public API: the cache and its statistics, recompilation reasons,
// static and donated arguments, composition with the other transformations, and errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "kiln/checkpoint.h"
#include "kiln/control_flow.h"
#include "kiln/jit.h"
#include "kiln/ops.h"
#include "kiln/random.h"
#include "kiln/vmap.h"
#include "prims/ids/control_flow.h"
#include "support/arrays.h"
#include "support/errors.h"
#include "transforms/pass_test_support.h"

namespace kiln {
namespace {
using ::kiln::testing::random_f32;

using testing::error_of;
using testing::fails_with;
using ::testing::HasSubstr;
using testing::same_bits;

// Sets an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) previous_ = old;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (previous_) {
      setenv(name_, previous_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> previous_;
};

TEST(Jit, SecondCallWithTheSameSignatureReusesTheExecutable) {
  auto f = [](const Array& x, const Array& y) { return tanh(x * y + 1.0f); };
  auto jitted = jit(f);
  Array x = random_f32(1, {16, 8}), y = random_f32(2, {16, 8});
  EXPECT_TRUE(same_bits(jitted(x, y), f(x, y)));
  Array x2 = random_f32(3, {16, 8});
  EXPECT_TRUE(same_bits(jitted(x2, y), f(x2, y)));
  JitStats stats = jitted.stats();
  EXPECT_EQ(stats.calls, 2);
  EXPECT_EQ(stats.compiles, 1);
  EXPECT_EQ(stats.cache_hits, 1);
  EXPECT_GT(stats.compile_seconds, 0.0);
  ASSERT_EQ(stats.compile_reasons.size(), 1u);
  EXPECT_EQ(stats.compile_reasons[0], "first call");
}

TEST(Jit, RecompilesWhenAShapeChangesAndSaysWhich) {
  auto jitted = jit([](const Array& w, const Array& x) { return matmul(x, w); });
  Array w = random_f32(1, {8, 4});
  jitted(w, random_f32(2, {128, 8}));
  jitted(w, random_f32(3, {64, 8}));
  jitted(w, random_f32(4, {128, 8}));  // the first executable is still cached
  JitStats stats = jitted.stats();
  EXPECT_EQ(stats.compiles, 2);
  EXPECT_EQ(stats.cache_hits, 1);
  ASSERT_EQ(stats.compile_reasons.size(), 2u);
  EXPECT_EQ(stats.compile_reasons[1], "argument 1 changed from f32[128,8] to f32[64,8]");
}

TEST(Jit, RecompilesForANewDtypeOrTreeLeafAndNamesTheLeaf) {
  auto jitted =
      jit([](const Tree& p, const Array& x) { return x * p["w"].leaf() + p["b"].leaf(); });
  Tree p = Tree::dict({{"b", Tree(random_f32(1, {4}))}, {"w", Tree(random_f32(2, {4}))}});
  jitted(p, random_f32(3, {4}));
  Tree p64 = Tree::dict(
      {{"b", Tree(random_f32(1, {4}))}, {"w", Tree(random_f32(2, {4}).astype(DType::f64))}});
  EXPECT_THAT(error_of([&] { jitted(p64, random_f32(3, {4})); }), ::testing::IsEmpty());
  EXPECT_EQ(jitted.stats().compile_reasons.back(),
            "argument 0 leaf 1 changed from f32[4] to f64[4]");
}

TEST(Jit, StaticArgumentsArePartOfTheSignature) {
  auto jitted = jit([](const Array& x, int power) {
    Array y = x;
    for (int i = 1; i < power; ++i) y = y * x;
    return y;
  });
  Array x = from_host<float>({1, 2, 3}, {3});
  EXPECT_EQ(jitted(x, 2).to_vector<float>(), (std::vector<float>{1, 4, 9}));
  EXPECT_EQ(jitted(x, 3).to_vector<float>(), (std::vector<float>{1, 8, 27}));
  EXPECT_EQ(jitted(x, 2).to_vector<float>(), (std::vector<float>{1, 4, 9}));
  JitStats stats = jitted.stats();
  EXPECT_EQ(stats.compiles, 2);
  EXPECT_EQ(stats.compile_reasons[1], "argument 1 (static) changed from 2 to 3");
}

TEST(Jit, StaticArgnumsNamingAnArrayIsAnError) {
  auto jitted = jit([](const Array& x, const Array& y) { return x + y; },
                    {.static_argnums = {1}, .name = "add"});
  Array x = from_host<float>({1}, {1});
  // The error names the line that made the jitted function (here, this file).
  EXPECT_TRUE(fails_with([&] { jitted(x, x); }, {"jit 'add'", "static_argnums names argument 1",
                                                 "f32[1]", "not hashable", "jit_test.cc"}));
  auto out_of_range = jit([](const Array& x) { return x; }, {.static_argnums = {3}});
  EXPECT_TRUE(
      fails_with([&] { out_of_range(x); }, {"static_argnums names argument 3", "1 argument"}));
}

TEST(Jit, LogsRecompilationsWhenAsked) {
  ScopedEnv log("KILN_LOG_RECOMPILES", "1");
  auto jitted = jit([](const Array& x) { return x * 2.0f; }, {.name = "double"});
  ::testing::internal::CaptureStderr();
  jitted(from_host<float>({1, 2}, {2}));
  jitted(from_host<float>({1, 2, 3}, {3}));
  std::string log_text = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(log_text, HasSubstr("jit 'double' compiled (compilation 1"));
  EXPECT_THAT(log_text, HasSubstr("first call"));
  EXPECT_THAT(log_text, HasSubstr("argument 0 changed from f32[2] to f32[3]"));
}

TEST(Jit, DumpsTheProgramBeforeAndAfterEveryPass) {
  std::filesystem::path dir = std::filesystem::temp_directory_path() / "kiln_dump_ir_test";
  std::filesystem::remove_all(dir);
  ScopedEnv dump("KILN_DUMP_IR", dir.string());
  jit([](const Array& x) { return exp(x) * 2.0f + 1.0f; }, {.name = "affine"})(random_f32(1, {8}));
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  std::string all;
  for (const std::string& name : names) all += name + "\n";
  for (const char* stage :
       {"traced", "simplify_algebra", "fold_constants", "eliminate_common_subexpressions",
        "merge_scans", "eliminate_dead_code", "steps", "memory_plan"}) {
    EXPECT_THAT(all, HasSubstr(stage));
  }
  EXPECT_THAT(all, HasSubstr("affine."));
  std::filesystem::remove_all(dir);
}

TEST(Jit, DumpsEachStepsTimeRewrittenAfterEveryCall) {
  std::filesystem::path dir = std::filesystem::temp_directory_path() / "kiln_dump_timings_test";
  std::filesystem::remove_all(dir);
  ScopedEnv dump("KILN_DUMP_IR", dir.string());
  auto step = jit([](const Array& w, const Array& x) { return tanh(matmul(x, w)) * 2.0f; },
                  {.name = "timed"});
  Array w = random_f32(1, {64, 32}), x = random_f32(2, {16, 64});
  for (int call = 0; call < 3; ++call) step(w, x).block_until_ready();
  std::filesystem::path path;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().filename().string().ends_with(".step_timings.txt")) path = entry.path();
  }
  ASSERT_FALSE(path.empty()) << "no step_timings file in " << dir;
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_THAT(text, HasSubstr("timed: the time of each step summed over 3 calls"));
  EXPECT_THAT(text, HasSubstr("dot_general"));  // the matmul's step
  EXPECT_THAT(text, HasSubstr("fused["));       // tanh and the scale, one fused step
  std::filesystem::remove_all(dir);
}

TEST(Jit, ComposesWithGradAndVmap) {
  auto loss = [](const Array& w, const Array& x) { return sum(tanh(matmul(x, w))); };
  Array w = random_f32(1, {6, 3}), x = random_f32(2, {5, 6});
  EXPECT_TRUE(same_bits(jit(grad(loss))(w, x), grad(loss)(w, x)));
  EXPECT_TRUE(same_bits(grad(jit(loss))(w, x), grad(loss)(w, x)));
  auto per_example = [](const Array& row) { return sum(row * row); };
  EXPECT_TRUE(same_bits(jit(vmap(per_example))(x), vmap(per_example)(x)));
  EXPECT_TRUE(same_bits(vmap(jit(per_example))(x), vmap(per_example)(x)));
  auto [value, gradient] = jit(value_and_grad(loss))(w, x);
  EXPECT_TRUE(same_bits(value, loss(w, x)));
  EXPECT_TRUE(same_bits(gradient, grad(loss)(w, x)));
}

TEST(Jit, ResultsMayBeInputsConstantsOrRepeated) {
  Array constant = from_host<float>({5, 6}, {2});
  auto jitted = jit([&](const Array& x, const Array& y) {
    Array z = x + y;
    return std::vector<Array>{x, z, z, constant, reshape(y, {2, 1})};
  });
  Array x = from_host<float>({1, 2}, {2}), y = from_host<float>({3, 4}, {2});
  std::vector<Array> out = jitted(x, y);
  ASSERT_EQ(out.size(), 5u);
  EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{1, 2}));
  EXPECT_EQ(out[1].to_vector<float>(), (std::vector<float>{4, 6}));
  EXPECT_EQ(out[2].to_vector<float>(), (std::vector<float>{4, 6}));
  EXPECT_EQ(out[3].to_vector<float>(), (std::vector<float>{5, 6}));
  EXPECT_EQ(out[4].shape(), Shape({2, 1}));
  EXPECT_EQ(out[4].to_vector<float>(), (std::vector<float>{3, 4}));
}

TEST(Jit, ElementwiseChainsFuseIntoOneStepWithoutTemporaries) {
  auto chain = [](const Array& x, const Array& b) {
    Array y = x * 2.0f + b;
    y = maximum(y, scalar(0.0)) - 1.0f;
    return abs(y) * 3.0f + 0.5f;
  };
  Array x = random_f32(1, {1000, 37});
  Array b = random_f32(2, {1, 37});
  auto jitted = jit(chain);
  Compiled compiled = jitted.compile(x, b);
  EXPECT_THAT(compiled.steps_text(), HasSubstr("fused["));
  EXPECT_EQ(compiled.memory_plan().temp_bytes, 0) << compiled.steps_text();
  EXPECT_TRUE(same_bits(jitted(x, b), chain(x, b)));
}

TEST(Jit, FusionKeepsSpecialValuesBitForBit) {
  auto f = [](const Array& x) { return exp(-x) * x / (x + 1.0f) - sqrt(abs(x)); };
  Array x = from_host<float>(
      {0.0f, -0.0f, 1.0f, -1.0f, INFINITY, -INFINITY, NAN, 1e-40f, 3e38f, -2.5f}, {10});
  EXPECT_TRUE(same_bits(jit(f)(x), f(x)));
}

TEST(Jit, MemoryPlanReusesBuffersOfDeadValues) {
  auto mlp = [](const Array& x, const Array& w1, const Array& w2, const Array& w3) {
    Array h = tanh(matmul(x, w1));
    h = tanh(matmul(h, w2));
    return matmul(h, w3);
  };
  Array x = random_f32(1, {64, 32}), w1 = random_f32(2, {32, 64}), w2 = random_f32(3, {64, 64}),
        w3 = random_f32(4, {64, 8});
  Compiled compiled = jit(mlp).compile(x, w1, w2, w3);
  const MemoryPlanReport& plan = compiled.memory_plan();
  EXPECT_GT(plan.num_buffers, 0);
  EXPECT_LT(plan.temp_bytes, plan.temp_bytes_unplanned) << plan.to_string();
  EXPECT_EQ(plan.output_bytes, 64 * 8 * 4);
  EXPECT_EQ(plan.argument_bytes, (64 * 32 + 32 * 64 + 64 * 64 + 64 * 8) * 4);
  EXPECT_EQ(plan.peak_bytes,
            plan.argument_bytes + plan.constant_bytes + plan.output_bytes + plan.temp_bytes);
  EXPECT_TRUE(same_bits(jit(mlp)(x, w1, w2, w3), mlp(x, w1, w2, w3)));
}

TEST(Jit, DonatedArgumentsAreReusedAndDeleted) {
  auto update =
      jit([](const Array& w, const Array& g) { return w - g * 0.5f; }, {.donate_argnums = {0}});
  Array g = from_host<float>({2, 4}, {2});
  Array w = from_host<float>({1, 1}, {2});
  Array w2 = update(w, g);
  EXPECT_EQ(w2.to_vector<float>(), (std::vector<float>{0, -1}));
  EXPECT_EQ(update.stats().donations_used, 1);
  EXPECT_TRUE(fails_with([&] { w.to_host(); }, {"donated to a jit call"}));
  EXPECT_EQ(update.compile(w2, g).memory_plan().output_bytes, 0);
}

TEST(Jit, ADonatedBufferSharedWithAnotherArrayIsNotReused) {
  auto update = jit([](const Array& w) { return w + 1.0f; }, {.donate_argnums = {0}});
  Array w = from_host<float>({1, 2}, {2});
  Array view = reshape(w, {2, 1});  // shares w's buffer
  Array w2 = update(w);
  EXPECT_EQ(update.stats().donations_unusable, 1);
  EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{1, 2}));
  EXPECT_EQ(view.to_vector<float>(), (std::vector<float>{1, 2}));
  EXPECT_EQ(w2.to_vector<float>(), (std::vector<float>{2, 3}));
}

TEST(Jit, CustomVjpFunctionsAreInlined) {
  auto square = custom_vjp(
      "square",
      [](const Array& x) {
        return std::pair{x * x, std::vector<Array>{x}};
      },
      [](const std::vector<Array>& saved, const Array& ct) { return ct * 2.0f * saved[0]; });
  auto f = [&](const Array& x) { return sum(square(x)); };
  Array x = random_f32(1, {7});
  EXPECT_TRUE(same_bits(jit(f)(x), f(x)));
  EXPECT_TRUE(same_bits(jit(grad(f))(x), grad(f)(x)));
  EXPECT_THAT(jit(f).compile(x).program().to_string(),
              ::testing::Not(HasSubstr("custom_vjp_call")));
}

TEST(Jit, KernelErrorsSurfaceAtSynchronisationNamingThePrimitive) {
  auto f = [](const Array& x, const Array& i) { return take(x, i, 0, IndexMode::kError); };
  Array x = from_host<float>({1, 2, 3}, {3});
  Array bad = from_host<int32_t>({0, 7}, {2});
  Array y = jit(f)(x, bad);
  EXPECT_TRUE(fails_with([&] { y.block_until_ready(); }, {"gather"}));
}

TEST(Jit, InsideATraceTheFunctionIsInlined) {
  auto inner = jit([](const Array& x) { return x * 3.0f; });
  TracedProgram program =
      make_program([&](const Array& x) { return inner(x) + 1.0f; }, from_host<float>({1}, {1}));
  EXPECT_THAT(program.to_string(), HasSubstr("mul"));
  EXPECT_EQ(inner.stats().compiles, 0);
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

std::vector<Array> layer_params(uint32_t seed) {
  return {random::normal(random::key(seed), {32, 16}) * 0.2f, zeros({16}),
          random::normal(random::key(seed + 1), {16, 4}) * 0.2f, zeros({4})};
}

Array mlp_loss(const std::vector<Array>& p, const Array& x, const Array& y) {
  Array h = maximum(matmul(x, p[0]) + p[1], scalar(0.0));
  Array out = matmul(h, p[2]) + p[3];
  return mean((out - y) * (out - y));
}

TEST(JitTrainStep, CompilesOnceAcrossStepsWithNewValues) {
  auto step = jit(value_and_grad(mlp_loss), JitOptions().named("train_step"));
  std::vector<Array> params = layer_params(1);
  Array x = random::normal(random::key(5), {8, 32});
  Array y = random::normal(random::key(6), {8, 4});
  for (int i = 0; i < 3; ++i) {
    auto [loss, grads] = step(params, x, y);
    auto [eager_loss, eager_grads] = value_and_grad(mlp_loss)(params, x, y);
    EXPECT_TRUE(same_bits(loss, eager_loss));
    for (size_t k = 0; k < params.size(); ++k) {
      EXPECT_TRUE(same_bits(grads[k], eager_grads[k])) << "step " << i << " grad " << k;
      params[k] = params[k] - grads[k] * 0.1f;
    }
  }
  JitStats stats = step.stats();
  EXPECT_EQ(stats.compiles, 1);
  EXPECT_EQ(stats.cache_hits, 2);
}

TEST(JitCost, ReportsTheFlopsOfTheOptimisedProgram) {
  auto f = jit([](const Array& x, const Array& w) { return matmul(x, w); });
  Array x = random::normal(random::key(1), {8, 32}), w = random::normal(random::key(2), {32, 16});
  CostReport report = f.cost_analysis(x, w);
  EXPECT_DOUBLE_EQ(report.total.flops, 2.0 * 8 * 32 * 16);
  EXPECT_EQ(f.stats().compiles, 1);
}

// A block with a wide hidden layer: its intermediates are what checkpoint recomputes.
Array wide_block(const Array& h, const Array& w_in, const Array& w_out) {
  return h + matmul(tanh(matmul(h, w_in)), w_out);
}

TEST(JitCheckpoint, RematerialisationLowersThePlannedPeakAndKeepsGradients) {
  std::vector<Array> ws;
  for (uint32_t i = 0; i < 8; ++i) {
    ws.push_back(random::normal(random::key(10 + i), {16, 64}) * 0.1f);
    ws.push_back(random::normal(random::key(30 + i), {64, 16}) * 0.1f);
  }
  Array x = random::normal(random::key(99), {32, 16});
  auto remat_block = checkpoint(wide_block, save_nothing());
  auto plain = [](const std::vector<Array>& p, const Array& in) {
    Array h = in;
    for (size_t i = 0; i < p.size(); i += 2) h = wide_block(h, p[i], p[i + 1]);
    return sum(h * h);
  };
  auto remat = [&](const std::vector<Array>& p, const Array& in) {
    Array h = in;
    for (size_t i = 0; i < p.size(); i += 2) h = remat_block(h, p[i], p[i + 1]);
    return sum(h * h);
  };
  auto plain_step = jit(grad(plain));
  auto remat_step = jit(grad(remat));
  MemoryPlanReport plain_plan = plain_step.compile(ws, x).memory_plan();
  MemoryPlanReport remat_plan = remat_step.compile(ws, x).memory_plan();
  EXPECT_LT(remat_plan.peak_bytes, plain_plan.peak_bytes)
      << "plain: " << plain_plan.to_string() << "\nremat: " << remat_plan.to_string();
  std::vector<Array> g_plain = plain_step(ws, x);
  std::vector<Array> g_remat = remat_step(ws, x);
  std::vector<Array> g_eager = grad(plain)(ws, x);
  ASSERT_EQ(g_plain.size(), g_remat.size());
  for (size_t i = 0; i < g_plain.size(); ++i) {
    EXPECT_TRUE(same_bits(g_plain[i], g_eager[i])) << i;
    EXPECT_TRUE(same_bits(g_remat[i], g_plain[i])) << i;
  }
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// Control flow compiles into the executable (sub-programs become sub-executables) and gives
// the eager bits.
TEST(JitControlFlow, ScanCondAndWhileRunCompiledAndMatchEager) {
  auto rnn = [](const Array& w, const Array& xs) {
    auto [last, hs] = scan(
        [&](const Array& h, const Array& x) {
          Array next = tanh(matmul(h, w) + x);
          return std::pair{next, next * 2.0f};
        },
        zeros({1, 4}), xs);
    return sum(hs) + sum(last);
  };
  Array w = random::normal(random::key(1), {4, 4}) * 0.5f;
  Array xs = random::normal(random::key(2), {6, 1, 4});
  auto jitted = jit(rnn);
  EXPECT_TRUE(same_bits(jitted(w, xs), rnn(w, xs)));
  Compiled compiled = jitted.compile(w, xs);
  EXPECT_THAT(compiled.steps_text(), HasSubstr("scan"));
  EXPECT_GT(compiled.memory_plan().argument_bytes, 0) << "the program ran interpreted";
  EXPECT_TRUE(same_bits(jit(grad(rnn))(w, xs), grad(rnn)(w, xs)));
  // value_and_grad: the primal loop and the VJP's stacking loop run as one (merge_scans),
  // so the optimised program holds one forward scan and one backward scan, and the loss
  // and gradient keep the eager bits.
  auto with_value = jit(value_and_grad(rnn));
  auto [loss, gradient] = with_value(w, xs);
  auto [eager_loss, eager_gradient] = value_and_grad(rnn)(w, xs);
  EXPECT_TRUE(same_bits(loss, eager_loss));
  EXPECT_TRUE(same_bits(gradient, eager_gradient));
  TracedProgram optimised = with_value.compile(w, xs).program();
  EXPECT_EQ(testing::count_prim(*optimised.program, prim::scan), 2) << optimised;

  auto branchy = [](const Array& x) {
    return cond(
        sum(x) > 0.0f, [](const Array& v) { return v * 2.0f; }, [](const Array& v) { return -v; },
        x);
  };
  Array positive = from_host<float>({1, 2}, {2}), negative = from_host<float>({-1, -2}, {2});
  EXPECT_TRUE(same_bits(jit(branchy)(positive), branchy(positive)));
  EXPECT_TRUE(same_bits(jit(branchy)(negative), branchy(negative)));

  auto halve_until_small = [](const Array& x) {
    return while_loop([](const Array& v) { return sum(v * v) > 1.0f; },
                      [](const Array& v) { return v * 0.5f; }, x);
  };
  Array big = from_host<float>({3, 4}, {2});
  EXPECT_TRUE(same_bits(jit(halve_until_small)(big), halve_until_small(big)));
  EXPECT_EQ(jit(halve_until_small)(big).to_vector<float>(), (std::vector<float>{0.375f, 0.5f}));

  auto empty_scan = [](const Array& c) {
    return scan(
               [](const Array& h, const std::vector<Array>&) {
                 return std::pair{h + 1.0f, std::vector<Array>{}};
               },
               c, std::vector<Array>{}, ScanOptions{.length = 0})
        .first;
  };
  Array c = from_host<float>({7}, {1});
  EXPECT_TRUE(same_bits(jit(empty_scan)(c), c));
}

}  // namespace
}  // namespace kiln
