// checkpoint (rematerialization): for each policy, gradients of an 8-layer tanh MLP equal
// those without checkpointing bit for bit (the recomputation runs the same primitives on
// the same values in the same order, and the backward pass applies the same VJP rules),
// and so do vmap's per-example gradients; gradients of gradients agree to rounding; the
// gradient program recomputes behind an optimization_barrier; the forward keeps exactly
// the residuals the policy says; closures, static arguments and the errors for bad names.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "ir/printer.h"
#include "kiln/checkpoint.h"
#include "kiln/ops.h"
#include "kiln/transforms.h"
#include "kiln/vmap.h"
#include "prims/ids/custom.h"
#include "support/errors.h"
#include "support/text.h"

namespace kiln {
namespace {

using ::kiln::testing::count_of;

using ::testing::HasSubstr;

constexpr int kLayers = 8;
constexpr int64_t kWidth = 6;

std::vector<Array> make_weights(DType dtype) {
  std::vector<Array> ws;
  for (int i = 0; i < kLayers; ++i) {
    std::vector<double> values;
    for (int64_t k = 0; k < kWidth * kWidth; ++k) {
      values.push_back(0.8 * std::sin(1.0 + 0.7 * static_cast<double>(k) + 1.3 * i));
    }
    ws.push_back(astype(from_host<double>(values, {kWidth, kWidth}), dtype));
  }
  return ws;
}

Array make_input(DType dtype, int64_t rows = 4) {
  std::vector<double> values;
  for (int64_t k = 0; k < rows * kWidth; ++k)
    values.push_back(std::cos(0.3 * static_cast<double>(k)));
  return astype(from_host<double>(values, {rows, kWidth}), dtype);
}

// Eight tanh layers; layer i's output is marked "h<i>" for save_named.
Array mlp(const std::vector<Array>& ws, const Array& x) {
  Array h = x;
  for (int i = 0; i < kLayers; ++i) {
    h = checkpoint_name(tanh(matmul(h, ws[static_cast<size_t>(i)])), fmt::format("h{}", i));
  }
  return h;
}

auto plain_loss = [](const std::vector<Array>& ws, const Array& x) {
  Array y = mlp(ws, x);
  return sum(y * y);
};

auto remat_loss(CheckpointPolicy policy) {
  auto body = checkpoint(mlp, std::move(policy));
  return [body](const std::vector<Array>& ws, const Array& x) {
    Array y = body(ws, x);
    return sum(y * y);
  };
}

std::vector<std::pair<std::string, CheckpointPolicy>> policies() {
  return {{"save_nothing", save_nothing()},
          {"save_dot_outputs", save_dot_outputs()},
          {"save_named", save_named({"h2", "h5"})}};
}

void expect_same_bits(const Array& a, const Array& b, const std::string& what) {
  ASSERT_EQ(a.aval(), b.aval()) << what;
  EXPECT_EQ(a.to_vector<float>(), b.to_vector<float>()) << what;
}

TEST(Checkpoint, EagerValueEqualsTheFunction) {
  std::vector<Array> ws = make_weights(DType::f32);
  Array x = make_input(DType::f32);
  for (const auto& [name, policy] : policies()) {
    expect_same_bits(checkpoint(mlp, policy)(ws, x), mlp(ws, x), name);
  }
}

TEST(Checkpoint, GradientsEqualTheUncheckpointedOnesBitForBit) {
  std::vector<Array> ws = make_weights(DType::f32);
  Array x = make_input(DType::f32);
  auto [expected_ws, expected_x] = grad<0, 1>(plain_loss)(ws, x);
  for (const auto& [name, policy] : policies()) {
    auto [got_ws, got_x] = grad<0, 1>(remat_loss(policy))(ws, x);
    ASSERT_EQ(got_ws.size(), expected_ws.size());
    for (size_t i = 0; i < got_ws.size(); ++i) {
      expect_same_bits(got_ws[i], expected_ws[i], fmt::format("{}: dw{}", name, i));
    }
    expect_same_bits(got_x, expected_x, name + ": dx");
  }
}

// d/dx <grad_x loss(x), v>: a Hessian-vector product through the checkpointed MLP.
TEST(Checkpoint, GradientOfGradientEqualsTheUncheckpointedOne) {
  std::vector<Array> ws = make_weights(DType::f64);
  Array x = make_input(DType::f64);
  Array v = make_input(DType::f64) * 0.5 + 0.25;
  auto hvp = [&](auto loss) {
    return grad([&](const Array& y) { return sum(grad<1>(loss)(ws, y) * v); })(x);
  };
  std::vector<double> expected = hvp(plain_loss).to_vector<double>();
  for (const auto& [name, policy] : policies()) {
    std::vector<double> got = hvp(remat_loss(policy)).to_vector<double>();
    ASSERT_EQ(got.size(), expected.size());
    double scale = 0, worst = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      scale = std::max(scale, std::abs(expected[i]));
      worst = std::max(worst, std::abs(got[i] - expected[i]));
    }
    // Not bit for bit: at second order the cotangents that reach the custom function's
    // residuals (its inputs and saved values) are differentiated through its forward and
    // added after those of its backward rule (custom_vjp.cc), an order of summation the
    // plain program does not have. Measured: 1.5e-18 against entries up to 4.3e-4.
    EXPECT_LE(worst, 1e-12 * scale) << name;
    EXPECT_GT(scale, 1e-5) << name;  // a Hessian-vector product that is not trivially 0
  }
}

TEST(Checkpoint, VmapOfGradientGivesPerExampleGradients) {
  std::vector<Array> ws = make_weights(DType::f32);
  Array xs = reshape(make_input(DType::f32, 12), {3, 4, kWidth});  // 3 examples
  std::vector<Array> expected = vmap(grad(plain_loss), {kNotMapped, 0})(ws, xs);
  for (const auto& [name, policy] : policies()) {
    std::vector<Array> got = vmap(grad(remat_loss(policy)), {kNotMapped, 0})(ws, xs);
    ASSERT_EQ(got.size(), static_cast<size_t>(kLayers));
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].shape(), (Shape{3, kWidth, kWidth}));
      expect_same_bits(got[i], expected[i], fmt::format("{}: dw{}", name, i));
    }
  }
}

// The custom_vjp_call's results: the function's output, then the residuals.
size_t residual_count(const TracedProgram& traced) {
  for (const Equation& equation : traced.program->equations) {
    if (equation.prim == prim::custom_vjp_call) return equation.outputs.size() - 1;
  }
  ADD_FAILURE() << "no custom_vjp_call in\n" << traced;
  return 0;
}

TEST(Checkpoint, ForwardKeepsOnlyWhatThePolicySays) {
  std::vector<Array> ws = make_weights(DType::f32);
  Array x = make_input(DType::f32);
  size_t operands = kLayers + 1;  // the weights and x
  EXPECT_EQ(residual_count(make_program(remat_loss(save_nothing()), ws, x)), operands);
  EXPECT_EQ(residual_count(make_program(remat_loss(save_dot_outputs()), ws, x)),
            operands + kLayers);
  EXPECT_EQ(residual_count(make_program(remat_loss(save_named({"h2", "h5"})), ws, x)),
            operands + 2);
}

TEST(Checkpoint, GradientProgramRecomputesBehindABarrier) {
  std::vector<Array> ws = make_weights(DType::f32);
  Array x = make_input(DType::f32);
  std::string plain = make_program(grad(plain_loss), ws, x).to_string();
  EXPECT_EQ(count_of(plain, "optimization_barrier"), 0);

  std::string nothing = make_program(grad(remat_loss(save_nothing())), ws, x).to_string();
  ASSERT_EQ(count_of(nothing, "= optimization_barrier"), 1) << nothing;
  std::string after = nothing.substr(nothing.find("= optimization_barrier"));
  // The whole forward is recomputed after the barrier: 8 matmuls and 8 tanh, then the
  // backward's matmuls: dw and dh for every layer. (dh of layer 0 is the cotangent of x,
  // which this gradient does not need: a custom function's backward gives every operand
  // one. jit's dead-code elimination drops it; eagerly it is one wasted matmul.)
  EXPECT_EQ(count_of(after, "= tanh"), kLayers) << nothing;
  EXPECT_EQ(count_of(after, "= dot_general"), 3 * kLayers) << nothing;

  std::string dots = make_program(grad(remat_loss(save_dot_outputs())), ws, x).to_string();
  after = dots.substr(dots.find("= optimization_barrier"));
  // Matmuls are not recomputed: the saved ones stand in for them; tanh is.
  EXPECT_EQ(count_of(after, "= tanh"), kLayers) << dots;
  EXPECT_EQ(count_of(after, "= dot_general"), 2 * kLayers) << dots;
  EXPECT_EQ(count_of(after, "name=\"saved dot_general\""), kLayers) << dots;
}

TEST(Checkpoint, ClosedOverValuesGetTheirGradient) {
  Array x = make_input(DType::f32);
  Array w = make_weights(DType::f32)[0];
  auto loss = [&](const Array& weight, bool remat) {
    auto layer = [&](const Array& h) { return tanh(matmul(h, weight)); };
    Array y = remat ? checkpoint(layer)(x) : layer(x);
    return sum(y * y);
  };
  expect_same_bits(grad(loss)(w, true), grad(loss)(w, false), "d weight");
}

TEST(Checkpoint, NestedCheckpointsAndTreeArguments) {
  Array x = make_input(DType::f32);
  std::vector<Array> weights = make_weights(DType::f32);
  Tree params = Tree::dict({{"w1", weights[0]}, {"w2", weights[1]}});
  auto inner = [](const Array& h, const Array& w) { return tanh(matmul(h, w)); };
  auto block = [&](const Tree& p, const Array& h, bool remat) {
    Array a =
        remat ? checkpoint(inner, save_dot_outputs())(h, p["w1"].leaf()) : inner(h, p["w1"].leaf());
    return inner(a, p["w2"].leaf());
  };
  auto remat_block = checkpoint([&](const Tree& p, const Array& h) { return block(p, h, true); });
  auto remat_loss = [&](const Tree& p) { return sum(remat_block(p, x)); };
  auto plain_loss = [&](const Tree& p) { return sum(block(p, x, false)); };
  Tree got = grad(remat_loss)(params), expected = grad(plain_loss)(params);
  for (std::string key : {"w1", "w2"}) {
    expect_same_bits(got[key].leaf(), expected[key].leaf(), "d" + key);
  }
}

// checkpoint(f) written inline makes a new object on every call; it must reuse the custom
// function of the same program rather than register one per call (a training loop would
// grow the table every step).
TEST(Checkpoint, InlineCheckpointReusesItsFunction) {
  auto loss = [](const Array& x) {
    return sum(checkpoint([](const Array& y) { return tanh(y) * 3.0; })(x));
  };
  Array x = make_input(DType::f32);
  std::string first = make_program(loss, x).to_string();
  EXPECT_THAT(first, HasSubstr("custom_vjp_call[name=\"checkpoint[save_nothing]\""));
  EXPECT_EQ(make_program(loss, x).to_string(), first);
  grad(loss)(x);
  EXPECT_EQ(make_program(loss, x).to_string(), first);
}

TEST(Checkpoint, StaticArgumentsAndCapturedScalarsAreRespected) {
  auto scaled = checkpoint([](const Array& x, double scale) { return tanh(x * scale); });
  Array x = make_input(DType::f32);
  expect_same_bits(scaled(x, 2.0), tanh(x * 2.0), "scale 2");
  expect_same_bits(scaled(x, 3.0), tanh(x * 3.0), "scale 3");
  auto g = [&](double scale) {
    return grad([&](const Array& y) { return sum(scaled(y, scale)); })(x);
  };
  expect_same_bits(g(3.0), grad([](const Array& y) { return sum(tanh(y * 3.0)); })(x), "grad");
}

TEST(Checkpoint, NamedValueMarksAreIdentities) {
  Array x = make_input(DType::f32);
  expect_same_bits(checkpoint_name(x, "a"), x, "eager");
  std::string text =
      make_program([](const Array& y) { return checkpoint_name(y, "a"); }, x).to_string();
  EXPECT_THAT(text, HasSubstr("checkpoint_name[name=\"a\"]"));
  expect_same_bits(grad([](const Array& y) { return sum(checkpoint_name(y, "a") * y); })(x),
                   x * 2.0, "grad");
}

TEST(Checkpoint, SaveNamedWithAMarkTheFunctionNeverMakesIsAnError) {
  std::vector<Array> ws = make_weights(DType::f32);
  Array x = make_input(DType::f32);
  EXPECT_TRUE(testing::fails_with(
      [&] {
        grad(remat_loss(save_named({"h2", "h9"})))(ws, x);
      },
      {"checkpoint: the policy save_named(h2,h9) names \"h9\", but the function marks no value "
       "with that name (it marks \"h0\", \"h1\"",
       "checkpoint_test.cc:",
       "HINT: mark the value to keep with kiln::checkpoint_name(x, \"h9\")"}));
  auto unmarked = checkpoint([](const Array& y) { return tanh(y); }, save_named({"h"}));
  EXPECT_TRUE(testing::fails_with([&] { unmarked(x); }, {"(it marks none)"}));
}

TEST(Checkpoint, BadNamesAreErrors) {
  Array x = make_input(DType::f32);
  EXPECT_TRUE(testing::fails_with(
      [&] { checkpoint_name(x, ""); },
      {"checkpoint_name: a checkpoint name must be non-empty", "got \"\"", "checkpoint_test.cc:"}));
  EXPECT_TRUE(testing::fails_with(
      [&] {
        save_named({"ok", "bad\"name"});
      },
      {"save_named: a checkpoint name must be non-empty, without "
       "quotes",
       "got \"bad\"name\""}));
}

TEST(Checkpoint, PolicyNames) {
  EXPECT_EQ(save_nothing().to_string(), "save_nothing");
  EXPECT_EQ(save_dot_outputs().to_string(), "save_dot_outputs");
  EXPECT_EQ(save_named({"a", "b"}).to_string(), "save_named(a,b)");
  std::vector<Array> ws = make_weights(DType::f32);
  std::string text =
      make_program(checkpoint(mlp, save_dot_outputs()), ws, make_input(DType::f32)).to_string();
  EXPECT_THAT(text, HasSubstr("custom_vjp_call[name=\"checkpoint[save_dot_outputs]\""));
}

}  // namespace
}  // namespace kiln
