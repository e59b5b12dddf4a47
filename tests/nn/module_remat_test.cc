// nn::Remat: a module rematerialized in training through kiln::checkpoint. It is
// transparent (the names, params and summary of the module it wraps) and changes no number:
// the outputs, the new state and the gradients are those of the plain module bit for bit,
// with dropout (the key goes into the checkpoint) and batch norm (state through it), eagerly
// and under jit, with either policy; the recomputation is in the gradient's program.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kiln/checkpoint.h"
#include "kiln/grad.h"
#include "kiln/jit.h"
#include "kiln/nn.h"
#include "kiln/ops.h"
#include "kiln/random.h"
#include "kiln/tracing.h"
#include "support/arrays.h"

namespace kiln::nn {
namespace {

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

}  // namespace
}  // namespace kiln::nn
