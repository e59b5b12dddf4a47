// Building the train and eval step functions and compiling them with jit.
#include "train/train_step.h"
#include "base/check.h"
#include "train/precision.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "kiln/device.h"
#include "kiln/error.h"
#include "kiln/ops.h"
#include "kiln/sharding.h"
#include "kiln/transforms.h"
#include "train/data_parallel_parts.h"
#include "train/prediction_sums.h"
#include "train/process_parallel_step.h"

namespace kiln::train {
namespace {

// Per leaf, whether its gradient holds a NaN or an infinity, as one bool vector in leaf
// order (the order of Tree::leaves_with_paths, so index i names parameter i). max and min
// propagate NaN and see +-inf, so two reductions without temporaries decide it; counting
// the non-finite elements would cost a full elementwise pass and an integer reduction.
Array nonfinite_flags(const Tree& grads) {
  std::vector<Array> flags;
  for (const Array& leaf : grads.leaves()) {
    flags.push_back(logical_not(is_finite(max(leaf)) & is_finite(min(leaf))));
  }
  if (flags.empty()) return zeros({0}, DType::bool_);
  return stack(flags);
}

// Leaf by leaf: `updated` where ok, else `previous` (a skipped step).
Tree keep_if(const Array& ok, const Tree& updated, const Tree& previous) {
  if (updated.num_leaves() == 0) return updated;
  return tree_map([&ok](const Array& u, const Array& p) { return where(ok, u, p); }, updated,
                  previous);
}

}  // namespace

Tree initial_loss_scale(const LossScaleOptions& options) {
  if (options.mode != "dynamic") return Tree();
  return Tree::dict(
      {{"good_steps", zeros({}, DType::i32)}, {"scale", full({}, options.initial, DType::f32)}});
}

Array step_loss_scale(const LossScaleOptions& options, const Tree& loss_scale_state) {
  if (options.mode == "dynamic") return loss_scale_state["scale"].leaf();
  if (options.mode == "fixed") return full({}, options.initial, DType::f32);
  return Array();
}

namespace {

// The dynamic loss scale after a step whose gradients were (not) all finite: backed off
// (never below 1) and the count of good steps reset on an overflow; grown after
// growth_interval good steps in a row (unless that overflows f32).
Tree next_loss_scale(const LossScaleOptions& options, const Tree& state, const Array& finite) {
  const Array& scale = state["scale"].leaf();
  Array good = state["good_steps"].leaf() + full({}, 1, DType::i32);
  Array grow = finite & greater_equal(good, full({}, static_cast<double>(options.growth_interval),
                                                 DType::i32));
  Array grown = scale * full({}, options.growth, DType::f32);
  grown = where(is_finite(grown), grown, scale);
  Array backed_off = maximum(scale * full({}, options.backoff, DType::f32), full({}, 1));
  Array next_scale = where(finite, where(grow, grown, scale), backed_off);
  Array next_good = where(finite & logical_not(grow), good, zeros({}, DType::i32));
  return Tree::dict({{"good_steps", next_good}, {"scale", next_scale}});
}

bool is_step_count(const std::string& path) {
  return path == "count" || (path.size() > 6 && path.compare(path.size() - 6, 6, "/count") == 0);
}

// A skipped step's optimizer state: the previous one, but for the step counts when skipped
// steps advance the schedule.
Tree kept_opt_state(const Array& ok, const Tree& updated, const Tree& previous,
                    bool advance_count) {
  if (!advance_count || updated.num_leaves() == 0) return keep_if(ok, updated, previous);
  std::vector<Array> next = updated.leaves(), before = previous.leaves();
  std::vector<std::pair<std::string, Array>> named = updated.leaves_with_paths();
  for (size_t i = 0; i < next.size(); ++i) {
    if (!is_step_count(named[i].first)) next[i] = where(ok, next[i], before[i]);
  }
  return unflatten(updated.structure(), next);
}

}  // namespace

StepResult finish_step(const optim::GradientTransformation& optimizer, const StepOptions& options,
                       const Tree& params, const Tree& model_state, const Tree& opt_state,
                       const Tree& loss_scale, const Array& loss, const Array& correct,
                       const Tree& scaled_grads, const Tree& new_model_state,
                       const std::function<Array(const Array&)>& global_flags) {
  const LossScaleOptions& scaling = options.loss_scale;
  Array scale = step_loss_scale(scaling, loss_scale);
  // Unscaled in f32 (the params' dtype); a scale that is a power of two divides exactly.
  Tree grads = scaled_grads;
  if (scale.defined() && grads.num_leaves() > 0) {
    grads = tree_map([&scale](const Array& g) { return g / scale; }, grads);
  }
  auto [updates, new_opt_state] = optimizer.update(grads, opt_state, params);
  Tree new_params = optim::apply_updates(params, updates);
  Tree next_model_state = new_model_state;
  Array nonfinite = nonfinite_flags(grads);
  if (global_flags) nonfinite = global_flags(nonfinite);
  const bool dynamic = scaling.mode == "dynamic";
  Tree next_loss_scale_state = loss_scale;
  if (options.skip_nonfinite || dynamic) {
    Array grads_finite = sum(astype(nonfinite, DType::i32)) == 0;
    // With dynamic scaling an overflow is always skipped: that is how the scale is found.
    Array ok = is_finite(loss) & grads_finite;
    new_params = keep_if(ok, new_params, params);
    next_model_state = keep_if(ok, next_model_state, model_state);
    new_opt_state =
        kept_opt_state(ok, new_opt_state, opt_state, options.skipped_steps_advance_schedule);
    if (dynamic) next_loss_scale_state = next_loss_scale(scaling, loss_scale, grads_finite);
  }
  std::optional<Array> lr = optimizer.learning_rate(new_opt_state);
  std::vector<Tree::Item> metrics = {
      {"correct", correct}, {"loss", loss}, {"lr", lr ? *lr : zeros({})}, {"nonfinite", nonfinite}};
  if (scale.defined()) metrics.push_back({"loss_scale", scale});
  return StepResult(new_params, next_model_state, new_opt_state, next_loss_scale_state,
                    Tree::dict(std::move(metrics)));
}

namespace {

// One device: the batch's mean loss and its gradient in one pass.
StepFunction single_device_step(nn::Module model, optim::GradientTransformation optimizer,
                                StepOptions options) {
  return [model, optimizer, options](const Tree& params, const Tree& model_state,
                                     const Tree& opt_state, const Tree& loss_scale,
                                     const Array& images, const Array& labels, const Array& key,
                                     const Array& mask) {
    const bool masked = options.masked;
    const DType compute = options.compute;
    Array scale = step_loss_scale(options.loss_scale, loss_scale);
    auto loss_fn = [&](const Tree& p) {
      nn::ApplyOptions apply;
      apply.train = true;
      apply.key = key;
      nn::ApplyResult out = apply_in(compute, model, nn::Variables{p, model_state}, images, apply);
      // The padded rows (mask 0) add exact zeros, so the loss and its gradient are those of
      // the real rows alone.
      PredictionSums sums = prediction_sums(out.y, labels, masked ? mask : Array());
      Array loss = sums.loss_sum / sums.count;
      Tree aux = Tree::dict({{"correct", sums.correct}, {"loss", loss}, {"state", out.state}});
      // With loss scaling the gradient is that of the scaled loss; the step reports the loss.
      return std::make_pair(scale.defined() ? loss * scale : loss, aux);
    };
    auto [value, grads] = value_and_grad(loss_fn, HasAux{})(params);
    const Tree& aux = value.second;
    return finish_step(optimizer, options, params, model_state, opt_state, loss_scale,
                       aux["loss"].leaf(), aux["correct"].leaf(), grads, aux["state"]);
  };
}

PartitionSpec replicated_spec(int64_t rank) {
  return PartitionSpec(std::vector<std::vector<std::string>>(static_cast<size_t>(rank)));
}

// Whether `path` is `suffix` or ends with "/" + suffix.
bool ends_with_path(const std::string& path, const std::string& suffix) {
  if (path.size() < suffix.size() ||
      path.compare(path.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return false;
  }
  return path.size() == suffix.size() || path[path.size() - suffix.size() - 1] == '/';
}

}  // namespace

// The data-parallel step's state lives on the mesh between steps, each leaf where its
// StateLayout says; a state that arrives on one device (the first step, a resumed run) is
// placed so before the step, so that every step has one signature and compiles once.
Tree placed_on(const Tree& tree, const Mesh& mesh, const std::vector<PartitionSpec>& specs) {
  if (tree.num_leaves() == 0) return tree;
  std::vector<Array> leaves = tree.leaves();
  KILN_CHECK(specs.empty() || specs.size() == leaves.size());
  for (size_t i = 0; i < leaves.size(); ++i) {
    NamedSharding target(mesh, specs.empty() ? replicated_spec(leaves[i].rank()) : specs[i]);
    std::optional<NamedSharding> current = sharding_of(leaves[i]);
    if (!current || !(*current == target)) leaves[i] = device_put(leaves[i], target);
  }
  return unflatten(tree.structure(), leaves);
}

StateLayout state_layout(const Tree& params, const Tree& opt_state, const StepOptions& options) {
  const int64_t data = options.data_devices;
  auto fsdp = [&](const Array& leaf) {
    return options.shard_params && splits_over(leaf.shape(), data) ? split_rows(leaf.rank())
                                                                   : replicated_spec(leaf.rank());
  };
  StateLayout layout;
  std::vector<std::pair<std::string, Array>> named_params =
      params.num_leaves() > 0 ? params.leaves_with_paths()
                              : std::vector<std::pair<std::string, Array>>{};
  for (const auto& [path, leaf] : named_params) {
    auto split = options.tensor_parallel.find(path);
    layout.params.push_back(split != options.tensor_parallel.end() ? split->second : fsdp(leaf));
  }
  if (opt_state.num_leaves() == 0) return layout;
  for (const auto& [path, leaf] : opt_state.leaves_with_paths()) {
    // The longest param path that ends this one, with the same shape.
    std::optional<size_t> owner;
    for (size_t p = 0; p < named_params.size(); ++p) {
      const auto& [param_path, param] = named_params[p];
      if (param.shape() != leaf.shape() || !ends_with_path(path, param_path)) continue;
      if (!owner || param_path.size() > named_params[*owner].first.size()) owner = p;
    }
    layout.opt.push_back(owner && !options.tensor_parallel.empty() ? layout.params[*owner]
                                                                   : fsdp(leaf));
  }
  return layout;
}

bool is_replicated(const PartitionSpec& spec) {
  for (const auto& axes : spec.dims) {
    if (!axes.empty()) return false;
  }
  return true;
}

bool splits_over_axis(const PartitionSpec& spec, const std::string& axis) {
  for (const auto& axes : spec.dims) {
    if (std::find(axes.begin(), axes.end(), axis) != axes.end()) return true;
  }
  return false;
}

Mesh step_mesh(int64_t data_devices, int64_t model_devices) {
  if (model_devices > 1) return Mesh({{kDataAxis, data_devices}, {kModelAxis, model_devices}});
  return Mesh({{kDataAxis, data_devices}});
}

Tree on_one_device(const Tree& tree) {
  if (tree.num_leaves() == 0) return tree;
  return tree_map(
      [](const Array& leaf) {
        std::optional<NamedSharding> sharding = sharding_of(leaf);
        if (!sharding) return leaf;
        return is_replicated(sharding->spec()) ? shards(leaf).front() : device_put(leaf, device(0));
      },
      tree);
}

TrainStep::TrainStep(nn::Module model, optim::GradientTransformation optimizer, StepOptions options)
    : masked_(options.masked),
      chunks_(options.data_devices > 0 ? options.chunks : 0),
      accumulate_(options.data_devices > 0 ? 1 : options.accumulate),
      // In an MPI job, this process's part of the global mesh.
      mesh_(options.data_devices > 0
                ? std::optional<Mesh>(step_mesh(options.processes > 0
                                                    ? options.data_devices / options.processes
                                                    : options.data_devices,
                                                options.model_devices))
                : std::nullopt),
      options_(options),
      no_mask_(zeros({})),
      function_(options.data_devices > 0    ? data_parallel_step(model, optimizer, options)
                : options.privacy.enabled() ? private_step(model, optimizer, options)
                : options.accumulate > 1    ? accumulating_step(model, optimizer, options)
                                            : single_device_step(model, optimizer, options)),
      step_(function_,
            JitOptions()
                .named("train_step")
                .donating(options.keep_inputs ? std::vector<int>{} : std::vector<int>{0, 1, 2, 3})
                .flushing_denormals(options.flush_denormals)),
      processes_(options.processes > 0
                     ? std::make_shared<const ProcessParallelStep>(model, optimizer, options)
                     : nullptr) {}

StepMetrics TrainStep::run(TrainState& state, const Array& images, const Array& labels,
                           const Array& key, const Array& mask) const {
  KILN_CHECK(masked_ == mask.defined());
  // The batch splits into the mesh's chunks, or into the one-device step's micro-batches.
  const int64_t parts = chunks_ > 0 ? chunks_ : accumulate_;
  if (parts > 1 && (images.rank() == 0 || images.dim(0) % parts != 0)) {
    fail(kUnknownSite,
         fmt::format("train step: a batch of {} rows does not split into {} = {} equal parts",
                     images.rank() == 0 ? 0 : images.dim(0),
                     chunks_ > 0 ? "mesh.chunks" : "train.accumulate", parts),
         "choose a train.batch_size it divides, and set train.drop_remainder or "
         "train.pad_remainder when the last batch of an epoch would not divide");
  }
  if (chunks_ > 0) {
    if (!layout_) layout_ = state_layout(state.params, state.opt_state, options_);
    state = TrainState{
        placed_on(state.params, *mesh_, layout_->params), placed_on(state.model_state, *mesh_),
        placed_on(state.opt_state, *mesh_, layout_->opt), placed_on(state.loss_scale, *mesh_)};
  }
  auto [params, model_state, opt_state, loss_scale, metrics] =
      processes_ ? processes_->run(state, images, labels, key, masked_ ? mask : no_mask_)
                 : step_(state.params, state.model_state, state.opt_state, state.loss_scale, images,
                         labels, key, masked_ ? mask : no_mask_);
  state = TrainState{std::move(params), std::move(model_state), std::move(opt_state),
                     std::move(loss_scale)};
  return StepMetrics{metrics["loss"].leaf(), metrics["correct"].leaf(), metrics["lr"].leaf(),
                     metrics["nonfinite"].leaf(),
                     metrics.contains("loss_scale") ? metrics["loss_scale"].leaf() : Array()};
}

Compiled TrainStep::compiled(const TrainState& state, const Array& images, const Array& labels,
                             const Array& key, const Array& mask) const {
  if (processes_)
    return processes_->compiled(state, images, labels, key, masked_ ? mask : no_mask_);
  return step_.compile(state.params, state.model_state, state.opt_state, state.loss_scale, images,
                       labels, key, masked_ ? mask : no_mask_);
}

NonFiniteOrigin TrainStep::nonfinite_origin(const TrainState& before, const Array& images,
                                            const Array& labels, const Array& key,
                                            const Array& mask) const {
  KILN_CHECK(options_.keep_inputs && !processes_ && chunks_ == 0,
             "nonfinite_origin needs a one-device step that kept its inputs");
  return find_nonfinite(function_, before.params, before.model_state, before.opt_state,
                        before.loss_scale, images, labels, key, masked_ ? mask : no_mask_);
}

JitStats TrainStep::stats() const {
  return processes_ ? processes_->stats() : step_.stats();
}

EvalStep::EvalStep(nn::Module model, bool flush_denormals, DType compute)
    : eval_(Fn([model, compute](const Tree& params, const Tree& model_state, const Array& images,
                                const Array& labels) {
              nn::ApplyResult out =
                  apply_in(compute, model, nn::Variables{params, model_state}, images);
              PredictionSums sums = prediction_sums(out.y, labels, Array());
              return std::make_pair(sums.loss_sum, sums.correct);
            }),
            JitOptions().named("eval_step").flushing_denormals(flush_denormals)) {}

Compiled EvalStep::compiled(const TrainState& state, const Array& images,
                            const Array& labels) const {
  return eval_.compile(on_one_device(state.params), on_one_device(state.model_state), images,
                       labels);
}

EvalSums EvalStep::run(const TrainState& state, const Array& images, const Array& labels) const {
  auto [loss_sum, correct] =
      eval_(on_one_device(state.params), on_one_device(state.model_state), images, labels);
  return EvalSums{loss_sum, correct};
}

}  // namespace kiln::train
