// nn::Remat: a module rematerialized in training through kiln::checkpoint. It is
// transparent (the names, params and summary of the module it wraps) and changes no number:
// the outputs, the new state and the gradients are those of the plain module bit for bit,
// with dropout (the key goes into the checkpoint) and batch norm (state through it), eagerly
// and under jit, with either policy; the recomputation is in the gradient's program. A
// Sequential's remat spans do the same for runs of its own children.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <iostream>

#include "kiln/checkpoint.h"
#include "kiln/grad.h"
#include "kiln/jit.h"
#include "kiln/nn.h"
#include "kiln/ops.h"
#include "kiln/random.h"
#include "kiln/tracing.h"
#include "support/arrays.h"
#include "support/errors.h"

namespace kiln::nn {
namespace {

using ::kiln::testing::fails_with;
using ::kiln::testing::same_bits;

Module block() {
  return Sequential({Dense(32), BatchNorm(), Relu(), Dropout(0.25), Dense(16), Relu()});
}

Module model(bool remat, const CheckpointPolicy& policy = save_nothing()) {
  return Sequential({Dense(16), remat ? Remat(block(), policy) : block(), Dense(4)});
}

// The loss, the gradient and the new state of one training step of `m`.
std::tuple<Array, Tree, Tree> step(const Module& m, const Variables& v, const Array& x,
                                   const Array& key) {
  auto loss = [&](const Tree& params) {
    ApplyOptions train;
    train.train = true;
    train.key = key;
    ApplyResult out = m.apply(Variables{params, v.state}, x, train);
    return std::make_pair(sum(out.y * out.y), out.state);
  };
  auto [value, grads] = value_and_grad(loss, HasAux{})(v.params);
  return {value.first, grads, value.second};
}

TEST(Remat, IsTransparentAndChangesNoNumber) {
  Array x = random::normal(random::key(3), {8, 12});
  Array key = random::key(4);
  Module plain = model(false);
  Variables v = plain.init(random::key(5), x.aval());
  for (const CheckpointPolicy& policy : {save_nothing(), save_dot_outputs()}) {
    Module remat = model(true, policy);
    Variables w = remat.init(random::key(5), x.aval());
    ASSERT_EQ(w.params.structure(), v.params.structure());  // the same names
    EXPECT_EQ(remat.summary(x.aval()), plain.summary(x.aval()));
    auto [loss, grads, state] = step(plain, v, x, key);
    auto [remat_loss, remat_grads, remat_state] = step(remat, v, x, key);
    EXPECT_TRUE(same_bits(remat_loss, loss));
    for (size_t i = 0; i < grads.leaves().size(); ++i) {
      EXPECT_TRUE(same_bits(remat_grads.leaves()[i], grads.leaves()[i])) << i;
    }
    for (size_t i = 0; i < state.leaves().size(); ++i) {
      EXPECT_TRUE(same_bits(remat_state.leaves()[i], state.leaves()[i])) << i;
    }
    // Under jit too.
    auto jitted = jit([&](const Tree& params) {
      return std::get<1>(step(remat, {params, v.state}, x, key));
    });
    Tree jit_grads = jitted(v.params);
    for (size_t i = 0; i < grads.leaves().size(); ++i) {
      EXPECT_TRUE(same_bits(jit_grads.leaves()[i], grads.leaves()[i])) << i;
    }
  }
  // Evaluation has no backward pass: the plain module's apply.
  EXPECT_TRUE(same_bits(model(true).apply(v, x).y, plain.apply(v, x).y));
}

TEST(Remat, TheGradientRecomputesTheBlock) {
  Array x = random::normal(random::key(3), {8, 12});
  Module remat = model(true);
  Variables v = remat.init(random::key(5), x.aval());
  auto grad_of = [&](const Tree& params) {
    return std::get<1>(step(remat, {params, v.state}, x, random::key(4)));
  };
  std::string program = make_program(grad_of, v.params).to_string();
  EXPECT_THAT(program, ::testing::HasSubstr("checkpoint"));
  Module plain = model(false);
  auto plain_grad = [&](const Tree& params) {
    return std::get<1>(step(plain, {params, v.state}, x, random::key(4)));
  };
  EXPECT_THAT(make_program(plain_grad, v.params).to_string(),
              ::testing::Not(::testing::HasSubstr("checkpoint")));
}

// A Sequential's remat spans: runs of its own children rematerialized in place, so the
// children keep their names (the params' paths a config's checkpoints hold).
std::vector<Module> flat_layers() {
  return {Dense(16), Dense(32), BatchNorm(), Relu(), Dropout(0.25), Dense(16), Relu(), Dense(4)};
}

TEST(RematSpans, KeepTheNamesAndChangeNoNumber) {
  Array x = random::normal(random::key(3), {8, 12});
  Array key = random::key(4);
  Module plain = Sequential(flat_layers());
  Variables v = plain.init(random::key(5), x.aval());
  auto [loss, grads, state] = step(plain, v, x, key);
  std::vector<std::vector<RematSpan>> layouts{
      {{.first = 1, .count = 6, .policy = save_nothing()}},
      {{.first = 0, .count = 2, .policy = save_dot_outputs()},
       {.first = 5, .count = 3, .policy = save_nothing()}},
      {{.first = 7, .count = 1, .policy = save_nothing()}}};
  for (size_t l = 0; l < layouts.size(); ++l) {
    Module spans = Sequential(flat_layers(), layouts[l]);
    Variables w = spans.init(random::key(5), x.aval());
    ASSERT_EQ(w.params.structure(), v.params.structure()) << l;
    auto [span_loss, span_grads, span_state] = step(spans, v, x, key);
    EXPECT_TRUE(same_bits(span_loss, loss)) << l;
    for (size_t i = 0; i < grads.leaves().size(); ++i) {
      EXPECT_TRUE(same_bits(span_grads.leaves()[i], grads.leaves()[i])) << l << ", leaf " << i;
    }
    ASSERT_EQ(span_state.structure(), state.structure()) << l;
    for (size_t i = 0; i < state.leaves().size(); ++i) {
      EXPECT_TRUE(same_bits(span_state.leaves()[i], state.leaves()[i])) << l << ", leaf " << i;
    }
    auto jitted = jit([&](const Tree& params) {
      return std::get<1>(step(spans, {params, v.state}, x, key));
    });
    Tree jit_grads = jitted(v.params);
    for (size_t i = 0; i < grads.leaves().size(); ++i) {
      EXPECT_TRUE(same_bits(jit_grads.leaves()[i], grads.leaves()[i])) << l << ", leaf " << i;
    }
    EXPECT_TRUE(same_bits(spans.apply(v, x).y, plain.apply(v, x).y)) << l;
  }
}

TEST(RematSpans, ShrinkTheCompiledStepsIntermediates) {
  // Wide enough that activations, not params, fill the arena.
  Array x = random::normal(random::key(3), {256, 12});
  // Three blocks whose normalisation and activation make intermediates besides the matmul.
  auto layers = [] {
    std::vector<Module> all;
    for (int block = 0; block < 3; ++block) {
      all.push_back(Dense(256));
      all.push_back(LayerNorm());
      all.push_back(Activation("gelu"));
    }
    all.push_back(Dense(4));
    return all;
  };
  auto blocks = [](const CheckpointPolicy& policy) {
    return std::vector<RematSpan>{{.first = 0, .count = 3, .policy = policy},
                                  {.first = 3, .count = 3, .policy = policy},
                                  {.first = 6, .count = 3, .policy = policy}};
  };
  auto temp_bytes = [&](const Module& m) {
    Variables v = m.init(random::key(5), x.aval());
    auto step_grads = jit([&](const Tree& params) {
      return std::get<1>(step(m, {params, v.state}, x, random::key(4)));
    });
    return step_grads.compile(v.params).memory_plan().temp_bytes;
  };
  int64_t plain = temp_bytes(Sequential(layers()));
  int64_t dots = temp_bytes(Sequential(layers(), blocks(save_dot_outputs())));
  int64_t nothing = temp_bytes(Sequential(layers(), blocks(save_nothing())));
  EXPECT_LT(dots, plain);
  EXPECT_LT(nothing, dots);
  std::cout << "plan's intermediates: none " << plain << ", save_dot_outputs " << dots
            << ", save_nothing " << nothing << " bytes\n";
}

TEST(RematSpans, OutsideTheLayersOrOverlappingAreClearErrors) {
  EXPECT_TRUE(fails_with([] { Sequential(flat_layers(), {{.first = 6, .count = 3}}); },
                         {"Sequential of 8 layers", "remat span of 3 children from position 6",
                          "not within its layers"}));
  EXPECT_TRUE(fails_with([] { Sequential(flat_layers(), {{.first = 2, .count = 0}}); },
                         {"remat span of 0 children"}));
  EXPECT_TRUE(fails_with([] { Sequential(flat_layers(), {{.first = -1, .count = 2}}); },
                         {"from position -1"}));
  EXPECT_TRUE(fails_with(
      [] {
        Sequential(flat_layers(), {{.first = 3, .count = 2}, {.first = 0, .count = 4}});
      },
      {"remat span of 2 children from position 3 overlaps the span from position 0"}));
}

}  // namespace
}  // namespace kiln::nn
