// Fusion planning (which equations share a loop, and in what order the steps run) and the
// fused loops themselves: every fused result must equal the eager result bit for bit,
// including when the memory plan writes a result over an operand the loop still reads.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "ir/parser.h"
#include "kiln/jit.h"
#include "kiln/ops.h"
#include "kiln/random.h"
#include "support/arrays.h"
#include "transforms/jit/step_plan.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;
using testing::same_bits;

Array random_f32(uint32_t seed, Shape shape) {
  return random::normal(random::key(seed), shape, DType::f32);
}

// Every operand of every step is computed by an earlier step (or is an input/constant),
// and every equation runs exactly once.
void expect_valid_schedule(const Program& program, const std::vector<detail::StepPlan>& steps) {
  std::set<VarId> defined(program.inputs.begin(), program.inputs.end());
  defined.insert(program.constants.begin(), program.constants.end());
  std::vector<int> runs(program.equations.size(), 0);
  for (const detail::StepPlan& step : steps) {
    std::set<VarId> inside;
    for (size_t e : step.equations) {
      ++runs[e];
      for (VarId in : program.equations[e].inputs) {
        EXPECT_TRUE(defined.count(in) != 0 || inside.count(in) != 0)
            << "v" << in << " is read before it is computed\n"
            << detail::steps_to_string(program, steps);
      }
      for (VarId out : program.equations[e].outputs) inside.insert(out);
    }
    defined.insert(inside.begin(), inside.end());
  }
  for (int count : runs) EXPECT_EQ(count, 1);
}

// The fused group (its equations' first result names, as printed) of each step with
// more than one equation.
std::vector<std::vector<VarId>> fused_groups(const Program& program,
                                             const std::vector<detail::StepPlan>& steps) {
  std::vector<std::vector<VarId>> groups;
  for (const detail::StepPlan& step : steps) {
    if (!step.fused()) continue;
    groups.emplace_back();
    for (size_t e : step.equations) groups.back().push_back(program.equations[e].outputs[0]);
  }
  return groups;
}

int count_fused_steps(const std::string& steps_text) {
  int count = 0;
  for (size_t at = steps_text.find("fused["); at != std::string::npos;
       at = steps_text.find("fused[", at + 1))
    ++count;
  return count;
}

TEST(FusionPlan, AnEquationJoiningTwoChainsMergesTheirGroups) {
  // An optimizer-like update: two chains (c = a*2 + 1 and d = b*b) meet at e.
  Program program = parse_program(
      "{ lambda ; a:f32[64] b:f32[64]. let c:f32[64] = mul a 2.0:f32[] "
      "c2:f32[64] = add c 1.0:f32[] d:f32[64] = mul b b e:f32[64] = div c2 d in (e) }");
  auto steps = detail::plan_steps(program, true);
  expect_valid_schedule(program, steps);
  ASSERT_EQ(steps.size(), 1u) << detail::steps_to_string(program, steps);
  EXPECT_EQ(steps[0].equations.size(), 4u);
}

TEST(FusionPlan, AMergeThatWouldFormACycleIsRefused) {
  // c is fused with e only if s (a reduction of c, outside any group) could run between
  // them; e reads both c's group and s, so merging c into e's group would need s both
  // before and after it.
  Program program = parse_program(
      "{ lambda ; a:f32[8,4]. let c:f32[8,4] = mul a 2.0:f32[] "
      "s:f32[8] = reduce_sum[axes=(1)] c "
      "t:f32[8,4] = broadcast_in_dim[shape=(8,4) broadcast_dimensions=(0)] s "
      "e:f32[8,4] = add c t in (e) }");
  auto steps = detail::plan_steps(program, true);
  expect_valid_schedule(program, steps);
  // The broadcast may fuse with e, but c's group cannot: it must run before the reduction.
  for (const auto& group : fused_groups(program, steps)) {
    bool has_c =
        std::find(group.begin(), group.end(), program.equations[0].outputs[0]) != group.end();
    bool has_e =
        std::find(group.begin(), group.end(), program.equations[3].outputs[0]) != group.end();
    EXPECT_FALSE(has_c && has_e) << detail::steps_to_string(program, steps);
  }
  EXPECT_EQ(fused_groups(program, steps).size(), 1u) << detail::steps_to_string(program, steps);
}

TEST(FusionPlan, WithoutFusionStepsAreTheEquationsInOrder) {
  Program program =
      parse_program("{ lambda ; a:f32[4]. let b:f32[4] = mul a a c:f32[4] = add b a in (c) }");
  auto steps = detail::plan_steps(program, false);
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0].equations, std::vector<size_t>{0});
  EXPECT_EQ(steps[1].equations, std::vector<size_t>{1});
}

TEST(FusionPlan, RandomGraphsGetValidSchedules) {
  // Random mixes of elementwise equations (fusible) and reductions/broadcasts (not, or
  // only as expansions) over two shapes: the schedule must always be valid.
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::string body;
    std::vector<std::string> big{"a", "b"};  // f32[6,5]
    std::vector<std::string> small;          // f32[6]
    int next = 0;
    auto fresh = [&] { return "v" + std::to_string(next++); };
    auto pick = [&](const std::vector<std::string>& from) {
      return from[std::uniform_int_distribution<size_t>(0, from.size() - 1)(rng)];
    };
    for (int i = 0; i < 14; ++i) {
      int kind = std::uniform_int_distribution<int>(0, 5)(rng);
      std::string name = fresh();
      if (kind <= 2) {
        const char* ops[] = {"add", "mul", "sub"};
        body += name + ":f32[6,5] = " + ops[kind] + " " + pick(big) + " " + pick(big) + " ";
        big.push_back(name);
      } else if (kind == 3) {
        body += name + ":f32[6] = reduce_sum[axes=(1)] " + pick(big) + " ";
        small.push_back(name);
      } else if (!small.empty()) {
        body += name + ":f32[6,5] = broadcast_in_dim[shape=(6,5) broadcast_dimensions=(0)] " +
                pick(small) + " ";
        big.push_back(name);
      } else {
        body += name + ":f32[6,5] = neg " + pick(big) + " ";
        big.push_back(name);
      }
    }
    Program program = parse_program("{ lambda ; a:f32[6,5] b:f32[6,5]. let " + body + "in (" +
                                    big.back() + ") }");
    auto steps = detail::plan_steps(program, true);
    SCOPED_TRACE(body);
    expect_valid_schedule(program, steps);
  }
}

TEST(FusedLoop, AdamLikeUpdateIsOneLoopAndMatchesEager) {
  auto update = [](const Array& g, const Array& m, const Array& v, const Array& p) {
    Array m_new = m * 0.9f + g * 0.1f;
    Array v_new = v * 0.999f + (g * g) * 0.001f;
    Array p_new = p - (m_new / (sqrt(v_new) + 1e-8f) + p * 0.01f) * 0.001f;
    return std::make_tuple(m_new, v_new, p_new);
  };
  for (Shape shape : {Shape{1}, Shape{17}, Shape{300, 7}, Shape{70000}}) {
    Array g = random_f32(1, shape), m = random_f32(2, shape), v = abs(random_f32(3, shape)),
          p = random_f32(4, shape);
    auto jitted = jit(update);
    Compiled compiled = jitted.compile(g, m, v, p);
    if (shape.num_elements() > 1) {  // (one element: the whole update is one fused step)
      EXPECT_EQ(count_fused_steps(compiled.steps_text()), 1) << compiled.steps_text();
    }
    auto [m1, v1, p1] = jitted(g, m, v, p);
    auto [m2, v2, p2] = update(g, m, v, p);
    EXPECT_TRUE(same_bits(m1, m2));
    EXPECT_TRUE(same_bits(v1, v2));
    EXPECT_TRUE(same_bits(p1, p2));
  }
}

TEST(FusedLoop, AResultPlacedOverAnOperandIsWrittenAfterTheLastRead) {
  // t dies in the fused step {r = t*2; q = r + t}; the memory plan may put r (read
  // outside the step by the reduction) over t, which q reads after r is computed.
  auto f = [](const Array& x) {
    Array t = transpose(x);
    Array r = t * 2.0f;
    Array q = r + t;
    return std::make_tuple(q, sum(r, {1}));
  };
  for (Shape shape : {Shape{3, 5}, Shape{512, 300}}) {
    Array x = random_f32(5, shape);
    auto jitted = jit(f);
    Compiled compiled = jitted.compile(x);
    EXPECT_GT(compiled.memory_plan().in_place, 0) << compiled.memory_plan().to_string();
    auto [q1, s1] = jitted(x);
    auto [q2, s2] = f(x);
    EXPECT_TRUE(same_bits(q1, q2));
    EXPECT_TRUE(same_bits(s1, s2));
  }
}

TEST(FusedLoop, SpecialValuesAndBothFloatTypesMatchEager) {
  auto f = [](const Array& x, const Array& y) {
    return maximum(x * y - 1.0f, y) / (abs(x) + 0.5f) + exp(minimum(x, y));
  };
  std::vector<float> values{0.0f,  -0.0f, 1.0f,  -1.0f,   INFINITY, -INFINITY, NAN,  1e-40f, 3e38f,
                            -2.5f, 7.0f,  0.25f, -1e-45f, 88.0f,    -90.0f,    2.0f, 3.0f};
  std::vector<float> others(values.rbegin(), values.rend());
  for (DType dtype : {DType::f32, DType::f64}) {
    Array x = astype(from_host<float>(values, {17}), dtype);
    Array y = astype(from_host<float>(others, {17}), dtype);
    EXPECT_TRUE(same_bits(jit(f)(x, y), f(x, y))) << dtype_name(dtype);
  }
}

#if defined(__x86_64__)  // elsewhere the option is a no-op
TEST(JitFloatMode, FlushingDenormalsIsAnOptionOfTheCompiledProgramOnly) {
  // 2^-140 is subnormal in f32; halving it stays subnormal under IEEE.
  Array x = from_host<float>({0x1p-140f, 1.0f, -0x1p-140f, 0x1p-126f}, {4});
  auto half = [](const Array& a) { return a * 0.5f; };
  std::vector<float> ieee = jit(half)(x).to_vector<float>();
  std::vector<float> flushed = jit(half, JitOptions().flushing_denormals())(x).to_vector<float>();
  EXPECT_EQ(ieee, (std::vector<float>{0x1p-141f, 0.5f, -0x1p-141f, 0x1p-127f}));
  // Subnormal inputs read as zero and subnormal results are written as zero.
  EXPECT_EQ(flushed, (std::vector<float>{0.0f, 0.5f, -0.0f, 0.0f}));
  // The device's threads are IEEE again afterwards: eager ops are unaffected.
  EXPECT_EQ(half(x).to_vector<float>(), ieee);
}
#endif

}  // namespace
}  // namespace kiln
