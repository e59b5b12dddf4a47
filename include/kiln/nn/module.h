// Functional neural-network modules, in the style of Flax's linen and Haiku: a Module
// holds only its configuration; its parameters live in a Tree that init creates and apply
// reads, so a whole train step is an ordinary function of (params, state, batch) that
// grad, vmap and jit transform.
//
//   nn::Module model = nn::Sequential({nn::Flatten(), nn::Dense(512), nn::Relu(),
//                                      nn::Dense(10)});
//   nn::Variables v = model.init(random::key(0), AbstractValue({1, 28, 28, 1}, DType::f32));
//   v.params.leaves_with_paths();   // dense_1/bias, dense_1/kernel, dense_3/bias, ...
//   auto [logits, state] = model.apply(v, images, {.train = true, .key = dropout_key});
//
// Sequential names its children "<kind>_<position>" ("dense_1", "conv2d_0"); a child
// without parameters (or state) has no entry in the params (or state) tree, and a model
// without any has a none tree. Errors name the child's path: "dense_3: Dense(10) expects
// inputs whose last axis is 512, got f32[128,256]".
//
// Keys: Sequential initialises child i with random::fold_in(key, i), and a layer draws its
// parameter j with random::fold_in(layer_key, j) (Dense: kernel 0, bias 1). In training,
// child i that needs randomness (Dropout) gets random::fold_in(options.key, i), so nested
// Dropouts all draw different masks from one key per step.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kiln/array.h"
#include "kiln/error.h"
#include "kiln/nn/activations.h"
#include "kiln/nn/initializers.h"
#include "kiln/ops.h"
#include "kiln/shape.h"
#include "kiln/tree.h"

namespace kiln {
struct CheckpointPolicy;
}

namespace kiln::nn {

struct Variables {
  Tree params;  // trained by the optimizer
  Tree state;   // updated by apply in training (BatchNorm's running statistics)
};

struct ApplyOptions {
  bool train = false;
  // Randomness for training-time layers (Dropout). Sequential folds each child's position
  // into this key (random::fold_in(key, i)), so every Dropout along a path draws its own
  // mask from one key per step. Required when train is true and the model has a Dropout
  // with rate > 0.
  Array key;
};

struct ApplyResult {
  Array y;
  Tree state;  // the new state (equal to the old one in evaluation)
};

class Layer;  // kiln/nn/layer.h: what a Module holds, and how to write one of your own

class Module {
 public:
  // Fails on a null layer, or one whose kind() is not lower-case letters, digits and '_'.
  explicit Module(std::shared_ptr<const Layer> layer, CallSite site = {});

  // Creates the parameters and state for inputs of type `input` (the batch axis first;
  // its size does not matter). Checks that the input fits, naming the layer if not.
  Variables init(const Array& key, const AbstractValue& input, CallSite site = {}) const;
  ApplyResult apply(const Variables& variables, const Array& x, const ApplyOptions& options = {},
                    CallSite site = {}) const;
  // The output type for an input type, without computing anything.
  AbstractValue output_type(const AbstractValue& input, CallSite site = {}) const;

  // "dense", "conv2d", "sequential", ...
  std::string_view kind() const;
  // A table with one line per layer: path, layer and configuration ("Conv2D(32, 3x3)"),
  // output type for `input`, parameter count; then the total, as Keras' model.summary().
  std::string summary(const AbstractValue& input) const;

  // The layer behind this module: containers call their children's through it.
  const Layer& layer() const { return *layer_; }

 private:
  std::shared_ptr<const Layer> layer_;
};

// ----- layers ----------------------------------------------------------------------------
// Each constructor checks its arguments at once; an error names the line that built the
// layer (`site`, which defaults to the caller's).
// Megatron-style tensor parallelism (Shoeybi et al., 2019): a column-split Dense layer, then
// elementwise layers, then a row-split one; docs/sharding.md, *Tensor parallel*.
enum class TensorParallel {
  kNone,
  // The kernel's columns and the bias are split over the axis: each device computes its
  // block of the features from the whole input.
  kColumn,
  // The kernel's rows are split over the axis and the input is this device's block of its
  // features (a column-split layer's output): the partial products are summed over the
  // axis (psum), then the whole bias is added.
  kRow,
};

struct DenseOptions {
  bool use_bias = true;
  Initializer kernel_init = lecun_normal();
  Initializer bias_init = zeros_init();
  // Inside a kiln::shard_map whose mesh has `parallel_axis`, apply expects the blocks
  // shard_map hands it: kColumn a kernel [in, features / n] and bias [features / n], kRow a
  // kernel [in / n, features]. Elsewhere (init, evaluation on whole params) it is an
  // ordinary Dense. psum's VJP is psum, so the gradient taken inside the body is that of the
  // sum of every device's loss: divide the loss by n, and psum over the axis the gradients
  // of the params it replicates (kiln's train step does both).
  TensorParallel parallel = TensorParallel::kNone;
  std::string parallel_axis = "model";
};
// y = x @ kernel + bias over the last axis; kernel [in, features].
Module Dense(int64_t features, DenseOptions options = {}, CallSite site = {});

struct Conv2DOptions {
  Dims strides = {1, 1};
  Padding padding = Padding::kValid;
  Dims dilation = {1, 1};
  bool use_bias = true;
  Initializer kernel_init = lecun_normal();
  Initializer bias_init = zeros_init();
};
// NHWC input, kernel HWIO [kh, kw, in, features].
Module Conv2D(int64_t features, Dims kernel_size, Conv2DOptions options = {}, CallSite site = {});

// Strides default to the window.
Module MaxPool(Dims window, Dims strides = {}, Padding padding = Padding::kValid,
               CallSite site = {});
Module AvgPool(Dims window, Dims strides = {}, Padding padding = Padding::kValid,
               CallSite site = {});
// Keeps the batch axis, flattens the rest.
Module Flatten();

struct NormOptions {
  double epsilon = 1e-5;
  bool use_scale = true;  // a learned scale (init 1)
  bool use_bias = true;   // a learned bias (init 0); RMSNorm has none
};
// Over every axis but the last (the features). Training: batch statistics, and the
// running ones move as running = momentum * running + (1 - momentum) * batch (the batch
// variance unbiased, as PyTorch). Evaluation: the running statistics.
Module BatchNorm(double momentum = 0.9, NormOptions options = {}, CallSite site = {});
Module LayerNorm(NormOptions options = {}, CallSite site = {});  // over the last axis
Module RMSNorm(NormOptions options = {}, CallSite site = {});    // the last axis, scale only

// Zeroes each element with probability `rate` in training and scales the rest by
// 1 / (1 - rate); the identity in evaluation. The mask is random::bernoulli(key, 1 - rate,
// x.shape()), so with the same key the output is Flax's nn.Dropout(rate)(x, rng=key) bit
// for bit (with JAX's default 32-bit floats, where 1 - rate is an f32 as here).
Module Dropout(double rate, CallSite site = {});
// Integer indices [...] -> [..., features]; table [num_embeddings, features] ~ N(0, 1).
Module Embedding(int64_t num_embeddings, int64_t features,
                 Initializer embedding_init = normal_init(1.0), CallSite site = {});

// An activation as a layer (no parameters): Activation("relu"), or the named shortcuts.
Module Activation(std::string_view name, CallSite site = {});
Module Relu();

Module Sequential(std::vector<Module> layers);
// The same, with spans of consecutive children rematerialized in training, each as one
// block (kiln/nn/remat_span.h): the same outputs and gradients, bit for bit, in less memory.
// Fails on a span that is empty, reaches past the last child, or overlaps another.
struct RematSpan;
Module Sequential(std::vector<Module> layers, std::vector<RematSpan> remat, CallSite site = {});
// x + inner(x); the inner module's output type must equal the input type. The Residual is
// transparent: its params, state, keys and path are the inner module's own (a Residual at
// "residual_1" around a Sequential has params {residual_1: {dense_0: ..., dense_2: ...}}).
Module Residual(Module inner);
// `inner` rematerialized in training (jax.checkpoint, flax.linen.remat): the backward pass
// recomputes inner's intermediate values from its inputs instead of keeping them from the
// forward pass, except those `policy` saves (kiln/checkpoint.h; by default none). The same
// outputs and gradients, bit for bit, in less memory for more compute. Transparent like
// Residual: its name in a Sequential, params, state and keys are inner's own.
Module Remat(Module inner);
Module Remat(Module inner, const CheckpointPolicy& policy);

// ----- modules of your own --------------------------------------------------------------
// A layer kiln does not have, from two functions, as Flax and Haiku users write one every
// day (docs/training.md, *Modules of your own*):
//
//   nn::Module block = nn::custom_module({
//       .name = "residual_mlp",
//       .init = [](const Array& key, const AbstractValue& input) {
//         int64_t c = input.shape[input.shape.rank() - 1];
//         return nn::Variables{Tree::dict({{"w", random::normal(key, {c, c}) * 0.1}}), Tree()};
//       },
//       .apply = [](const nn::Variables& v, const Array& x, const nn::ApplyOptions&) {
//         return nn::ApplyResult{x + nn::relu(matmul(x, v.params["w"].leaf())), v.state};
//       }});
//
// It composes like any layer: in Sequential (named "<name>_<position>"), under Residual,
// jit, grad and vmap. Errors its functions raise are prefixed with the layer's path. A
// layer with children of its own, or one that names its parameters' paths in its errors,
// subclasses nn::Layer (kiln/nn/layer.h) as kiln's own layers do.
struct ModuleFunctions {
  // The layer's kind: lower-case letters, digits and '_', the stem of the name Sequential
  // gives it ("residual_mlp_2").
  std::string name = {};
  // For summaries and errors ("ResidualMlp(512)"); empty: the name.
  std::string description = {};
  // The params and state (none: an empty Tree) for inputs of this type, drawn from `key`.
  std::function<Variables(const Array& key, const AbstractValue& input)> init = {};
  // The output and the new state (return variables.state when there is none).
  std::function<ApplyResult(const Variables& variables, const Array& x,
                            const ApplyOptions& options)>
      apply = {};
  // The output type for an input type, without computing. Optional: without it kiln runs
  // init and apply once on zeros of the input type to find it.
  std::function<AbstractValue(const AbstractValue& input)> output_type = {};
  // Whether apply reads options.key in training (a layer that draws random numbers), so that
  // Sequential hands it a key of its own.
  bool uses_key = false;
};
Module custom_module(ModuleFunctions functions, CallSite site = {});

// Number of scalar parameters in a params tree.
int64_t parameter_count(const Tree& params);

}  // namespace kiln::nn
