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
#include "jit/executable.h"
#include "jit/step_plan.h"
#include "kiln/jit.h"
#include "kiln/ops.h"
#include "kiln/random.h"
#include "support/arrays.h"
#include "transforms/eval.h"
#include "transforms/pass_test_support.h"

namespace kiln {
namespace {
using ::kiln::testing::random_f32;

using ::testing::HasSubstr;
using testing::same_bits;

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

// The executable of `program` with no argument donated.
std::shared_ptr<const detail::Executable> compile_all(const Program& program) {
  return detail::Executable::compile(program, std::vector<bool>(program.inputs.size(), false), {});
}

// The executable's results on `inputs` equal the eager interpreter's, bit for bit.
void expect_runs_like_eager(const detail::Executable& executable, const Program& program,
                            const std::vector<Array>& inputs) {
  int64_t used = 0, unusable = 0;
  std::vector<Array> compiled =
      executable.run(inputs, target_of(inputs, CallSite(), "test"), CallSite(), used, unusable);
  std::vector<Array> eager = eval_program(program, inputs, CallSite());
  ASSERT_EQ(compiled.size(), eager.size());
  for (size_t i = 0; i < eager.size(); ++i) {
    ASSERT_TRUE(same_bits(compiled[i], eager[i])) << "output " << i << "\n"
                                                  << executable.steps_text();
  }
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

// A dense layer's bias + ReLU and the mask its gradient needs: comparisons, selects, a
// bias broadcast along rows and scalars broadcast to the group's shape all run in one
// vector program, equal to eager bit for bit whether a block lies within one bias row (it
// is then read in place) or spans several (the bias is expanded per block).
TEST(FusedProgram, ReluLayerWithMaskMatchesEager) {
  auto layer = [](const Array& x, const Array& bias, const Array& g) {
    Array z = x + bias;
    Array y = maximum(z, scalar(0.0f));
    Array half = broadcast_to(scalar(1.0f), z.shape()) * 0.5f;
    Array mask = where(greater(z, scalar(0.0f)), broadcast_to(scalar(1.0f), z.shape()),
                       where(equal(z, scalar(0.0f)), half, broadcast_to(scalar(0.0f), z.shape())));
    return std::make_tuple(y, mask * g);
  };
  for (Shape shape :
       {Shape{1, 1}, Shape{1, 17}, Shape{3, 5}, Shape{300, 7}, Shape{128, 512}, Shape{9, 1000}}) {
    Array x = random_f32(11, shape);
    Array bias = reshape(random_f32(12, {shape[1]}), {1, shape[1]});
    Array g = random_f32(13, shape);
    auto jitted = jit(layer);
    Compiled compiled = jitted.compile(x, bias, g);
    EXPECT_THAT(compiled.steps_text(), HasSubstr("(vector program)")) << compiled.steps_text();
    auto [y1, d1] = jitted(x, bias, g);
    auto [y2, d2] = layer(x, bias, g);
    EXPECT_TRUE(same_bits(y1, y2)) << shape.to_string();
    EXPECT_TRUE(same_bits(d1, d2)) << shape.to_string();
  }
}

// Every comparison over special values (NaN compares unequal to everything, -0 == 0),
// with bool results returned, selects picking NaN payloads and signed zeros unchanged, a
// bool operand from memory, in f32 (vector loops) and f64.
TEST(FusedProgram, ComparisonsAndSelectsOfSpecialValuesMatchEager) {
  auto f = [](const Array& x, const Array& y, const Array& pred) {
    Array s = x + y;
    return std::make_tuple(equal(s, x), not_equal(s, x), less(s, y), less_equal(s, y),
                           greater(s, y), greater_equal(s, y), where(greater(s, y), x * 2.0f, y),
                           where(pred, s, x * y), where(pred, scalar(-0.0f), s));
  };
  std::vector<float> values{0.0f,  -0.0f, 1.0f,  -1.0f,   INFINITY, -INFINITY, NAN,  1e-40f, 3e38f,
                            -2.5f, 7.0f,  0.25f, -1e-45f, 88.0f,    -90.0f,    2.0f, 3.0f};
  std::vector<float> others(values.rbegin(), values.rend());
  std::vector<uint8_t> picks;
  for (size_t i = 0; i < values.size(); ++i) picks.push_back(static_cast<uint8_t>(i % 3 == 0));
  for (DType dtype : {DType::f32, DType::f64}) {
    for (int64_t repeat : {1, 40}) {  // 17 elements (a vector tail only) and 680
      std::vector<float> xs, ys;
      std::vector<bool> ps;
      for (int64_t r = 0; r < repeat; ++r) {
        xs.insert(xs.end(), values.begin(), values.end());
        ys.insert(ys.end(), others.begin(), others.end());
        for (uint8_t p : picks) ps.push_back(p != 0);
      }
      const auto n = static_cast<int64_t>(xs.size());
      Array x = astype(from_host<float>(xs, {n}), dtype);
      Array y = astype(from_host<float>(ys, {n}), dtype);
      Array pred =
          not_equal(from_host<float>(std::vector<float>(ps.begin(), ps.end()), {n}), scalar(0.0f));
      auto jitted = jit(f);
      if (dtype == DType::f32) {
        EXPECT_THAT(jitted.compile(x, y, pred).steps_text(), HasSubstr("(vector program)"));
      }
      auto jit_results = jitted(x, y, pred);
      auto eager_results = f(x, y, pred);
      auto expect_same = [&](const Array& a, const Array& b, int index) {
        EXPECT_TRUE(same_bits(a, b)) << dtype_name(dtype) << " result " << index << " n=" << n;
      };
      std::apply(
          [&](const auto&... jit_values) {
            std::apply(
                [&](const auto&... eager_values) {
                  int index = 0;
                  (expect_same(jit_values, eager_values, index++), ...);
                },
                eager_results);
          },
          jit_results);
    }
  }
}

// ReLU then dropout (the shape of a Dense-ReLU-Dropout block in training): selects whose
// operands are a full array, a tile and literal scalars, comparisons against literals.
TEST(FusedProgram, ReluThenDropoutMatchesEager) {
  auto f = [](const Array& x, const Array& zeros, const Array& u) {
    Array relu = where(less_equal(x, scalar(0.0f)), zeros, x);
    Array keep = less(u - 1.0f, scalar(0.5f));
    return where(keep, relu * 2.0f, scalar(0.0f));
  };
  for (Shape shape : {Shape{2, 32}, Shape{64, 100}}) {
    Array x = random_f32(31, shape);
    Array zeros = kiln::zeros(shape);
    Array u = random::uniform(random::key(32), shape) + 1.0f;
    auto jitted = jit(f);
    EXPECT_THAT(jitted.compile(x, zeros, u).steps_text(), HasSubstr("(vector program)"));
    EXPECT_TRUE(same_bits(jitted(x, zeros, u), f(x, zeros, u))) << shape.to_string();
  }
}

// A bias read after earlier steps' tiles have died: its expansion must not share a slot
// with them (expansions are written at the start of each block, before any step).
TEST(FusedProgram, ABroadcastReadLateKeepsItsOwnTile) {
  auto f = [](const Array& x, const Array& bias, const Array& s) {
    Array a = x * 2.0f;
    Array b = exp(a) + 1.0f;
    Array c = b * bias;
    Array d = c - broadcast_to(s, x.shape());
    return abs(d) * bias;
  };
  for (Shape shape : {Shape{2, 32}, Shape{40, 100}, Shape{3, 512}}) {
    Array x = random_f32(41, shape);
    Array bias = reshape(random_f32(42, {shape[1]}), {1, shape[1]});
    Array s = from_host<float>({0.25f}, {});
    auto jitted = jit(f);
    EXPECT_THAT(jitted.compile(x, bias, s).steps_text(), HasSubstr("(vector program)"));
    EXPECT_TRUE(same_bits(jitted(x, bias, s), f(x, bias, s))) << shape.to_string();
  }
}

// A single element broadcast and then read by a unary loop (which has no repeated-element
// form) is expanded per block, not aliased to the element.
TEST(FusedProgram, BroadcastScalarReadByAUnaryOpIsExpanded) {
  auto f = [](const Array& x, const Array& s) { return exp(broadcast_to(s, x.shape())) * x; };
  for (Shape shape : {Shape{5}, Shape{3000}}) {
    Array x = random_f32(21, shape);
    Array s = from_host<float>({0.75f}, {});
    auto jitted = jit(f);
    EXPECT_THAT(jitted.compile(x, s).steps_text(), HasSubstr("(vector program)"));
    EXPECT_TRUE(same_bits(jitted(x, s), f(x, s))) << shape.to_string();
  }
}

// Random groups of arithmetic, math, comparisons, selects and broadcasts (of a scalar
// argument, of literals, of a bias row) over shapes whose rows are shorter than, equal to
// and longer than a program block, on inputs full of special values: the compiled program
// must give the eager interpreter's bits for every output.
TEST(FusedProgram, RandomElementwiseGroupsMatchEager) {
  std::mt19937 rng(20261201);
  int programs = 0;
  for (int trial = 0; trial < 120; ++trial) {
    const std::string shapes[] = {"3,5", "4,600", "2,512"};
    const std::string shape = shapes[trial % 3];
    const std::string big_type = "f32[" + shape + "]";
    std::string body;
    std::vector<std::string> big{"a", "b"}, bools{"p"};
    int next = 0;
    auto below = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
    auto pick = [&](const std::vector<std::string>& from) {
      return from[static_cast<size_t>(below(static_cast<int>(from.size())))];
    };
    const char* literals[] = {"0.0:f32[]", "-0.0:f32[]", "1.5:f32[]", "s", "r"};
    auto small = [&] { return std::string(literals[below(5)]); };
    auto value = [&] { return below(3) == 0 ? small() : pick(big); };
    for (int i = 0; i < 12; ++i) {
      std::string name = "v" + std::to_string(next++);
      switch (below(6)) {
        case 0:
        case 1: {
          const char* ops[] = {"add", "sub", "mul", "div", "max", "min"};
          std::string x = pick(big), y = value();
          if (below(2) == 0) std::swap(x, y);
          body += name + ":" + big_type + " = " + ops[below(6)] + " " + x + " " + y + "\n";
          big.push_back(name);
          break;
        }
        case 2: {
          const char* ops[] = {"neg", "abs", "exp"};
          body += name + ":" + big_type + " = " + ops[below(3)] + " " + pick(big) + "\n";
          big.push_back(name);
          break;
        }
        case 3: {
          const char* ops[] = {"eq", "ne", "lt", "le", "gt", "ge"};
          body += name + ":bool[" + shape + "] = " + ops[below(6)] + " " + pick(big) + " " +
                  value() + "\n";
          bools.push_back(name);
          break;
        }
        case 4:
          body += name + ":" + big_type + " = select " + pick(bools) + " " + value() + " " +
                  pick(big) + "\n";
          big.push_back(name);
          break;
        default:
          body += name + ":" + big_type + " = broadcast_in_dim[shape=(" + shape + ") " +
                  (below(2) == 0 ? "broadcast_dimensions=()] s" : "broadcast_dimensions=(0,1)] r") +
                  "\n";
          big.push_back(name);
          break;
      }
    }
    const std::string columns = shape.substr(shape.find(',') + 1);
    Program program =
        parse_program("{ lambda ; a:" + big_type + " b:" + big_type + " p:bool[" + shape +
                      "] s:f32[] r:f32[1," + columns + "]. let\n" + body + "in (" + big.back() +
                      " " + pick(big) + " " + bools.back() + ") }");
    SCOPED_TRACE(body);
    auto executable = compile_all(program);
    programs += executable->steps_text().find("(vector program)") != std::string::npos ? 1 : 0;
    ASSERT_NO_FATAL_FAILURE(
        expect_runs_like_eager(*executable, program, testing::random_inputs(program, rng)));
  }
  EXPECT_GT(programs, 100);  // the generator exercises the vector programs
}

// A group with integer members runs member by member: operands from an earlier member's
// tile, read in place, a single element, a row expanded per tile, a broadcast member, a
// conversion and a float kernel, over shapes of one tile, several tiles and several chunks
// (whose last result streams to memory) give the eager interpreter's bits.
TEST(FusedLoop, MemberByMemberGroupsOfEveryOperandKindMatchEager) {
  std::mt19937 rng(5);
  for (const std::string shape : {"3,5", "40,600", "200,400"}) {
    const std::string ints = "i32[" + shape + "]", floats = "f32[" + shape + "]";
    const std::string columns = shape.substr(shape.find(',') + 1);
    Program program = parse_program(
        "{ lambda ; a:" + ints + " r:i32[1," + columns + "] s:i32[] p:bool[" + shape + "]. let b:" +
        ints + " = mul a r c:" + ints + " = add b s t:" + ints + " = broadcast_in_dim[shape=(" +
        shape + ") broadcast_dimensions=(0,1)] r d:" + ints + " = select p c t e:" + ints +
        " = max d 3:i32[] f:" + floats + " = convert_element_type[new_dtype=f32] e g:" + floats +
        " = exp f h:" + floats + " = mul g 0.5:f32[] in (c h) }");
    auto executable = compile_all(program);
    ASSERT_THAT(executable->steps_text(), HasSubstr("fused[8]"));
    ASSERT_THAT(executable->steps_text(), ::testing::Not(HasSubstr("(vector program)")));
    SCOPED_TRACE(shape);
    expect_runs_like_eager(*executable, program, testing::random_inputs(program, rng));
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
