// nn::Layer, the public interface every layer implements: a layer of the user's own
// written as kiln's are (a subclass), with children called through their layer() and the
// scope, gets Sequential's names and keys, the summary, jit (the same bits) and grad
// (finite differences); a null layer or a bad kind is refused.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "kiln/grad.h"
#include "kiln/jit.h"
#include "kiln/nn.h"
#include "kiln/ops.h"
#include "kiln/random.h"
#include "nn/module_testing.h"
#include "support/arrays.h"
#include "support/errors.h"

namespace kiln::nn {
namespace {

using ::kiln::testing::fails_with;
using ::kiln::testing::same_bits;
using testing::all_close;
using testing::f32_type;
using ::testing::HasSubstr;
using testing::normal_input;

// y = x * scale, one learned scalar: the example of kiln/nn/layer.h.
class Scaled final : public Layer {
 public:
  std::string_view kind() const override { return "scaled"; }
  std::string describe() const override { return "Scaled"; }
  AbstractValue output_type(const AbstractValue& input, const LayerScope&) const override {
    return input;
  }
  LayerInit init(const Array&, const AbstractValue& input, const LayerScope&) const override {
    return {{Tree::dict({{"scale", full({}, 2.0, input.dtype)}}), Tree()}, input};
  }
  ApplyResult apply(const Variables& v, const Array& x, const ApplyOptions&,
                    const LayerScope&) const override {
    return {x * v.params["scale"].leaf(), v.state};
  }
  int64_t count_params(const AbstractValue&, const LayerScope&) const override { return 1; }
};

// A container: `inner` twice with the same params, then Scaled as a child of its own
// ("scaled" in its params), each called with the child's scope so that errors and paths
// name where they sit.
class Twice final : public Layer {
 public:
  explicit Twice(Module inner) : inner_(std::move(inner)), scaled_(std::make_shared<Scaled>()) {}
  std::string_view kind() const override { return "twice"; }
  std::string describe() const override { return "Twice(" + inner_.layer().describe() + ")"; }
  AbstractValue output_type(const AbstractValue& input, const LayerScope& scope) const override {
    AbstractValue once = inner_.layer().output_type(input, scope.child("inner"));
    return inner_.layer().output_type(once, scope.child("inner"));
  }
  LayerInit init(const Array& key, const AbstractValue& input,
                 const LayerScope& scope) const override {
    LayerInit inner = inner_.layer().init(random::fold_in(key, 0), input, scope.child("inner"));
    LayerInit scaled = scaled_.layer().init(random::fold_in(key, 1), input, scope.child("scaled"));
    Tree params =
        Tree::dict({{"inner", inner.variables.params}, {"scaled", scaled.variables.params}});
    return {{params, Tree()}, output_type(input, scope)};
  }
  ApplyResult apply(const Variables& v, const Array& x, const ApplyOptions& options,
                    const LayerScope& scope) const override {
    Variables inner{v.params["inner"], Tree()};
    Array y = inner_.layer().apply(inner, x, options, scope.child("inner")).y;
    y = inner_.layer().apply(inner, y, options, scope.child("inner")).y;
    return scaled_.layer().apply({v.params["scaled"], Tree()}, y, options, scope.child("scaled"));
  }
  int64_t count_params(const AbstractValue& input, const LayerScope& scope) const override {
    return inner_.layer().count_params(input, scope.child("inner")) + 1;
  }

 private:
  Module inner_;
  Module scaled_;
};

TEST(Layer, ASubclassComposesAsKilnsOwnLayersDo) {
  Module model = Sequential({Dense(4), Module(std::make_shared<Twice>(Dense(4))), Dense(2)});
  Variables v = model.init(random::key(3), f32_type({1, 3}));
  std::vector<std::string> paths;
  for (const auto& [path, leaf] : v.params.leaves_with_paths()) paths.push_back(path);
  EXPECT_EQ(paths, (std::vector<std::string>{"dense_0/bias", "dense_0/kernel", "dense_2/bias",
                                             "dense_2/kernel", "twice_1/inner/bias",
                                             "twice_1/inner/kernel", "twice_1/scaled/scale"}));
  // Child 1's key is fold_in(key, 1), and Twice draws its inner Dense with fold_in(.., 0).
  Variables alone =
      Dense(4).init(random::fold_in(random::fold_in(random::key(3), 1), 0), f32_type({1, 4}));
  EXPECT_TRUE(
      same_bits(v.params["twice_1"]["inner"]["kernel"].leaf(), alone.params["kernel"].leaf()));

  Array x = normal_input(1, {5, 3});
  auto dense = [&](const Tree& p, const Array& in) {
    return matmul(in, p["kernel"].leaf()) + p["bias"].leaf();
  };
  const Tree& twice = v.params["twice_1"];
  Array h = dense(v.params["dense_0"], x);
  h = dense(twice["inner"], dense(twice["inner"], h)) * 2.0;
  EXPECT_TRUE(all_close(model.apply(v, x).y, dense(v.params["dense_2"], h)));

  std::string summary = model.summary(f32_type({1, 3}));
  EXPECT_THAT(summary, HasSubstr("twice_1"));
  EXPECT_THAT(summary, HasSubstr("Twice(Dense(4))"));
  EXPECT_THAT(summary, HasSubstr("21"));  // 4 x 4 + 4 + the scale

  auto jitted = jit([&](const Tree& p, const Array& in) {
    return model.apply({p, v.state}, in).y;
  });
  EXPECT_TRUE(same_bits(jitted(v.params, x), model.apply(v, x).y));
}

TEST(Layer, GradientsThroughASubclassMatchFiniteDifferences) {
  Module block(std::make_shared<Twice>(Dense(3)));
  Variables v = block.init(random::key(4), AbstractValue({1, 3}, DType::f64));
  Array x = astype(normal_input(5, {2, 3}), DType::f64);
  auto loss = [&](const Tree& p) { return sum(block.apply({p, Tree()}, x).y); };
  EXPECT_NO_THROW(check_grads(loss, std::tuple{v.params}));
}

TEST(Layer, ErrorsNameTheChildsPath) {
  Module model = Sequential({Dense(4), Module(std::make_shared<Twice>(Dense(5)))});
  // Dense(5) applied twice: its kernel is [4, 5], and the second call brings 5 features.
  Variables v = model.init(random::key(0), f32_type({1, 3}));
  EXPECT_TRUE(fails_with(
      [&] {
        (void)model.apply(v, normal_input(1, {2, 3}));
      },
      {"twice_1/inner: Dense(5) expects inputs whose last axis is 4"}));
}

class Nameless final : public Layer {
 public:
  explicit Nameless(std::string kind) : kind_(std::move(kind)) {}
  std::string_view kind() const override { return kind_; }
  std::string describe() const override { return "Nameless"; }
  AbstractValue output_type(const AbstractValue& input, const LayerScope&) const override {
    return input;
  }
  ApplyResult apply(const Variables& v, const Array& x, const ApplyOptions&,
                    const LayerScope&) const override {
    return {x, v.state};
  }

 private:
  std::string kind_;
};

TEST(Layer, ANullLayerOrABadKindIsRefused) {
  EXPECT_TRUE(fails_with([] { Module(std::shared_ptr<const Layer>()); }, {"the layer is null"}));
  EXPECT_TRUE(fails_with([] { Module(std::make_shared<Nameless>("My Layer")); },
                         {"'My Layer'", "lower-case letters"}));
  EXPECT_TRUE(fails_with([] { Module(std::make_shared<Nameless>("")); }, {"''"}));
  // The defaults: no params, no key, one summary row.
  Module plain(std::make_shared<Nameless>("plain"));
  EXPECT_TRUE(plain.init(random::key(0), f32_type({1, 2})).params.is_none());
  EXPECT_THAT(plain.summary(f32_type({1, 2})), HasSubstr("Nameless"));
}

}  // namespace
}  // namespace kiln::nn
