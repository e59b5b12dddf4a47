// LayerTelemetry (layer_telemetry.h): a sequential model's layers applied one by one as
// Sequential applies them (the same names, keys and params), a GPT-2's forward pass with its
// stages observed (nn/gpt2_observed.h); each output summarised as it passes.
#include "train/layer_telemetry.h"

#include <utility>

#include <fmt/format.h>

#include "kiln/grad.h"
#include "kiln/nn/layer.h"
#include "kiln/ops.h"
#include "kiln/random.h"
#include "nn/gpt2_observed.h"
#include "train/builders.h"
#include "train/prediction_sums.h"

namespace kiln::train {
namespace {

struct Piece {
  std::string name;  // "<kind>_<position>", as Sequential names it
  std::string type;  // the config's type: "relu", "dense", ...
  nn::Module module;
};

// A layer's entry of the params (or state), none for a layer without any.
Tree entry_or_none(const Tree& tree, const std::string& name) {
  return tree.contains(name) ? tree[name] : Tree();
}

Array squared_norm(const Tree& tree) {
  Array total = zeros({});
  for (const Array& leaf : tree.leaves()) {
    Array x = astype(leaf, DType::f32);
    total = total + sum(x * x);
  }
  return total;
}

// The summaries of one layer's output.
Tree activation_stats(const std::string& type, const Array& y) {
  Array z = astype(y, DType::f32);
  Array mean_value = mean(z);
  std::vector<Tree::Item> items = {
      {"activation_mean", mean_value},
      {"activation_std", sqrt(mean((z - mean_value) * (z - mean_value)))}};
  if (type == "relu" && z.rank() >= 1) {
    // A unit (a feature, the last axis) is dead when no example of the batch activates it.
    Dims all_but_last;
    for (int64_t a = 0; a + 1 < z.rank(); ++a) all_but_last.push_back(a);
    Array alive = astype(greater(max(z, all_but_last), full({}, 0.0)), DType::f32);
    items.emplace_back("dead_fraction", 1.0 - mean(alive));
  }
  if (type == "sigmoid") {
    Array saturated = bitwise_or(less(z, full({}, 0.01)), greater(z, full({}, 0.99)));
    items.emplace_back("saturated_fraction", mean(astype(saturated, DType::f32)));
  }
  if (type == "tanh") {
    items.emplace_back("saturated_fraction",
                       mean(astype(greater(abs(z), full({}, 0.99)), DType::f32)));
  }
  return Tree::dict(std::move(items));
}

// The figures of every layer from the gradient's auxiliary activation statistics, the
// gradients, the optimizer's updates and the params; `params_of(tree, name)` is a layer's
// entry of a params-shaped tree (none for a layer without params).
Tree layer_figures(const Tree& activations, const Tree& grads, const Tree& updates,
                   const Tree& params,
                   const std::function<Tree(const Tree&, const std::string&)>& params_of) {
  std::vector<Tree::Item> layers;
  for (const std::string& name : activations.keys()) {
    const Tree& stats = activations[name];
    std::vector<Tree::Item> items;
    for (const std::string& key_name : stats.keys()) items.emplace_back(key_name, stats[key_name]);
    Tree g = params_of(grads, name);
    if (g.num_leaves() > 0) {
      items.emplace_back("grad_norm", sqrt(squared_norm(g)));
      items.emplace_back("update_ratio", sqrt(squared_norm(params_of(updates, name)) /
                                              squared_norm(params_of(params, name))));
    }
    layers.emplace_back(name, Tree::dict(std::move(items)));
  }
  return Tree::dict(std::move(layers));
}

// A GPT-2's stages (nn/gpt2_observed.h) and their params: the embedding's are wte and wpe,
// block i's are h[i], the final norm's ln_f.
Tree gpt2_stage_params(const Tree& tree, const std::string& stage) {
  if (stage == "embedding") return Tree::dict({{"wpe", tree["wpe"]}, {"wte", tree["wte"]}});
  if (stage == "ln_f") return tree["ln_f"];
  return tree["h"][static_cast<size_t>(std::stoll(stage.substr(2)))];
}

using TelemetryFn = std::function<Tree(const Tree&, const Tree&, const Tree&, const Array&,
                                       const Array&, const Array&)>;

// The stages' names and the program that measures them.
std::pair<std::vector<std::string>, TelemetryFn> gpt2_telemetry(
    const ModelConfig& model, const optim::GradientTransformation& optimizer) {
  nn::Gpt2Config config = gpt2_config(model.gpt2);
  std::vector<std::string> names = {"embedding"};
  for (int64_t l = 0; l < config.layers; ++l) names.push_back(fmt::format("h_{}", l));
  names.push_back("ln_f");
  TelemetryFn fn = [config, optimizer](const Tree& params, const Tree& /*model_state*/,
                                       const Tree& opt_state, const Array& tokens,
                                       const Array& targets, const Array& /*key*/) {
    auto loss_fn = [&](const Tree& p) {
      std::vector<Tree::Item> activations;
      auto observe = [&](const std::string& stage, const Array& output) {
        activations.emplace_back(stage, activation_stats("", stop_gradient(output)));
      };
      Array logits = nn::gpt2_logits_observed(config, p, tokens, observe);
      PredictionSums sums = prediction_sums(logits, targets, Array());
      return std::make_pair(sums.loss_sum / sums.count, Tree::dict(std::move(activations)));
    };
    auto [value, grads] = value_and_grad(loss_fn, HasAux{})(params);
    auto [updates, unused_state] = optimizer.update(grads, opt_state, params);
    (void)unused_state;
    return layer_figures(value.second, grads, updates, params, gpt2_stage_params);
  };
  return {std::move(names), std::move(fn)};
}

}  // namespace

LayerTelemetry::LayerTelemetry(std::vector<std::string> names, Fn fn)
    : names_(std::move(names)), program_(std::move(fn), JitOptions().named("telemetry")) {}

std::optional<LayerTelemetry> LayerTelemetry::for_model(
    const ModelConfig& model, const optim::GradientTransformation& optimizer) {
  if (model.kind == "gpt2") {
    auto [names, fn] = gpt2_telemetry(model, optimizer);
    return LayerTelemetry(std::move(names), std::move(fn));
  }
  if (model.kind != "sequential") return std::nullopt;
  std::vector<Piece> pieces;
  std::vector<std::string> names;
  for (size_t i = 0; i < model.layers.size(); ++i) {
    nn::Module module = build_layer(model.layers[i]);
    std::string name = fmt::format("{}_{}", module.kind(), i);
    pieces.push_back(Piece{name, model.layers[i].type, module});
    names.push_back(name);
  }
  Fn fn = [pieces, optimizer](const Tree& params, const Tree& model_state, const Tree& opt_state,
                              const Array& images, const Array& labels, const Array& key) {
    // The forward pass layer by layer, as Sequential runs it in training; each output's
    // summaries ride out of the gradient as its auxiliary result.
    auto loss_fn = [&](const Tree& p) {
      std::vector<Tree::Item> activations;
      Array y = astype(images, DType::f32);
      for (size_t i = 0; i < pieces.size(); ++i) {
        const Piece& piece = pieces[i];
        nn::ApplyOptions options{true, Array()};
        if (piece.module.layer().uses_key(options)) {
          options.key = random::fold_in(key, static_cast<uint32_t>(i));
        }
        nn::Variables v{entry_or_none(p, piece.name), entry_or_none(model_state, piece.name)};
        y = piece.module.apply(v, y, options).y;
        activations.emplace_back(piece.name, activation_stats(piece.type, stop_gradient(y)));
      }
      PredictionSums sums = prediction_sums(y, labels, Array());
      return std::make_pair(sums.loss_sum / sums.count, Tree::dict(std::move(activations)));
    };
    auto [value, grads] = value_and_grad(loss_fn, HasAux{})(params);
    auto [updates, unused_state] = optimizer.update(grads, opt_state, params);
    (void)unused_state;
    return layer_figures(value.second, grads, updates, params, entry_or_none);
  };
  return LayerTelemetry(std::move(names), std::move(fn));
}

std::vector<LayerStats> LayerTelemetry::measure(const TrainState& state, const Array& images,
                                                const Array& labels, const Array& key) const {
  Tree out = program_(on_one_device(state.params), on_one_device(state.model_state),
                      on_one_device(state.opt_state), images, labels, key);
  std::vector<LayerStats> result;
  for (const std::string& name : names_) {
    LayerStats stats{name, {}};
    const Tree& layer = out[name];
    for (const std::string& key : layer.keys())
      stats.values[key] = layer[key].leaf().item<double>();
    result.push_back(std::move(stats));
  }
  return result;
}

}  // namespace kiln::train
