// Building the train and eval step functions and compiling them with jit.
#include "train/train_step.h"

#include <utility>
#include <vector>

#include <fmt/format.h>

#include "kiln/device.h"
#include "kiln/error.h"
#include "kiln/nn/losses.h"
#include "kiln/ops.h"
#include "kiln/sharding.h"
#include "kiln/transforms.h"
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

// The padded rows (mask 0) add exact zeros to the sum, so the loss and its gradient are
// those of the real rows alone.
Array masked_mean_loss(const Array& logits, const Array& labels, const Array& mask) {
  Array per_example = nn::softmax_cross_entropy_per_example(logits, labels);
  return sum(per_example * mask) / sum(mask);
}

Array masked_correct_count(const Array& logits, const Array& labels, const Array& mask) {
  Array hit = equal(argmax(logits, -1, DType::i32), labels);
  return sum(astype(hit, DType::i32) * astype(mask, DType::i32));
}

}  // namespace

StepResult finish_step(const optim::GradientTransformation& optimizer, bool skip_nonfinite,
                       const Tree& params, const Tree& model_state, const Tree& opt_state,
                       const Array& loss, const Array& correct, const Tree& grads,
                       const Tree& new_model_state,
                       const std::function<Array(const Array&)>& global_flags) {
  auto [updates, new_opt_state] = optimizer.update(grads, opt_state, params);
  Tree new_params = optim::apply_updates(params, updates);
  Tree next_model_state = new_model_state;
  Array nonfinite = nonfinite_flags(grads);
  if (global_flags) nonfinite = global_flags(nonfinite);
  if (skip_nonfinite) {
    Array ok = is_finite(loss) & (sum(astype(nonfinite, DType::i32)) == 0);
    new_params = keep_if(ok, new_params, params);
    next_model_state = keep_if(ok, next_model_state, model_state);
    new_opt_state = keep_if(ok, new_opt_state, opt_state);
  }
  std::optional<Array> lr = optimizer.learning_rate(new_opt_state);
  Tree metrics = Tree::dict({{"correct", correct},
                             {"loss", loss},
                             {"lr", lr ? *lr : zeros({})},
                             {"nonfinite", nonfinite}});
  return StepResult(new_params, next_model_state, new_opt_state, metrics);
}

namespace {

// One device: the batch's mean loss and its gradient in one pass.
StepFunction single_device_step(nn::Module model, optim::GradientTransformation optimizer,
                                StepOptions options) {
  return [model, optimizer, skip_nonfinite = options.skip_nonfinite, masked = options.masked](
             const Tree& params, const Tree& model_state, const Tree& opt_state,
             const Array& images, const Array& labels, const Array& key, const Array& mask) {
    auto loss_fn = [&](const Tree& p) {
      nn::ApplyOptions options;
      options.train = true;
      options.key = key;
      nn::ApplyResult out = model.apply(nn::Variables{p, model_state}, images, options);
      Array loss =
          masked ? masked_mean_loss(out.y, labels, mask) : nn::softmax_cross_entropy(out.y, labels);
      Array correct =
          masked ? masked_correct_count(out.y, labels, mask) : nn::correct_count(out.y, labels);
      Tree aux = Tree::dict({{"correct", correct}, {"state", out.state}});
      return std::make_pair(loss, aux);
    };
    auto [value, grads] = value_and_grad(loss_fn, HasAux{})(params);
    const auto& [loss, aux] = value;
    return finish_step(optimizer, skip_nonfinite, params, model_state, opt_state, loss,
                       aux["correct"].leaf(), grads, aux["state"]);
  };
}

}  // namespace

// The data-parallel step's state lives on the mesh between steps, each leaf replicated or
// (`split`, FSDP) split along its first dimension; a state that arrives on one device (the
// first step, a resumed run) is placed so before the step, so that every step has one
// signature and compiles once.
Tree placed_on(const Tree& tree, const Mesh& mesh, bool split) {
  if (tree.num_leaves() == 0) return tree;
  return tree_map(
      [&mesh, split](const Array& leaf) {
        std::vector<std::vector<std::string>> dims(leaf.shape().dims().size());
        if (split && splits_over(leaf.shape(), mesh.size())) dims[0] = {"data"};
        NamedSharding target(mesh, PartitionSpec(std::move(dims)));
        std::optional<NamedSharding> current = sharding_of(leaf);
        return current && *current == target ? leaf : device_put(leaf, target);
      },
      tree);
}

namespace {

bool replicated(const NamedSharding& sharding) {
  for (const auto& axes : sharding.spec().dims) {
    if (!axes.empty()) return false;
  }
  return true;
}

}  // namespace

Tree on_one_device(const Tree& tree) {
  if (tree.num_leaves() == 0) return tree;
  return tree_map(
      [](const Array& leaf) {
        std::optional<NamedSharding> sharding = sharding_of(leaf);
        if (!sharding) return leaf;
        return replicated(*sharding) ? shards(leaf).front() : device_put(leaf, device(0));
      },
      tree);
}

TrainStep::TrainStep(nn::Module model, optim::GradientTransformation optimizer, StepOptions options)
    : masked_(options.masked),
      chunks_(options.data_devices > 0 ? options.chunks : 0),
      // In an MPI job, this process's part of the global mesh.
      mesh_(options.data_devices > 0
                ? std::optional<Mesh>(Mesh(
                      {{"data", options.processes > 0 ? options.data_devices / options.processes
                                                      : options.data_devices}}))
                : std::nullopt),
      shard_params_(options.shard_params),
      no_mask_(zeros({})),
      step_(options.data_devices > 0 ? data_parallel_step(model, optimizer, options)
                                     : single_device_step(model, optimizer, options),
            JitOptions()
                .named("train_step")
                .donating({0, 1, 2})
                .flushing_denormals(options.flush_denormals)),
      processes_(options.processes > 0
                     ? std::make_shared<const ProcessParallelStep>(model, optimizer, options)
                     : nullptr) {}

StepMetrics TrainStep::run(TrainState& state, const Array& images, const Array& labels,
                           const Array& key, const Array& mask) const {
  KILN_CHECK(masked_ == mask.defined());
  if (chunks_ > 0 && (images.rank() == 0 || images.dim(0) % chunks_ != 0)) {
    fail(kUnknownSite,
         fmt::format("train step: a batch of {} rows does not split into mesh.chunks = {} equal "
                     "chunks",
                     images.rank() == 0 ? 0 : images.dim(0), chunks_),
         "choose train.batch_size divisible by mesh.chunks, and set train.drop_remainder or "
         "train.pad_remainder when the last batch of an epoch would not divide");
  }
  if (chunks_ > 0) {
    state = TrainState{placed_on(state.params, *mesh_, shard_params_),
                       placed_on(state.model_state, *mesh_, false),
                       placed_on(state.opt_state, *mesh_, shard_params_)};
  }
  auto [params, model_state, opt_state, metrics] =
      processes_ ? processes_->run(state, images, labels, key, masked_ ? mask : no_mask_)
                 : step_(state.params, state.model_state, state.opt_state, images, labels, key,
                         masked_ ? mask : no_mask_);
  state = TrainState{std::move(params), std::move(model_state), std::move(opt_state)};
  return StepMetrics{metrics["loss"].leaf(), metrics["correct"].leaf(), metrics["lr"].leaf(),
                     metrics["nonfinite"].leaf()};
}

Compiled TrainStep::compiled(const TrainState& state, const Array& images, const Array& labels,
                             const Array& key, const Array& mask) const {
  if (processes_)
    return processes_->compiled(state, images, labels, key, masked_ ? mask : no_mask_);
  return step_.compile(state.params, state.model_state, state.opt_state, images, labels, key,
                       masked_ ? mask : no_mask_);
}

JitStats TrainStep::stats() const {
  return processes_ ? processes_->stats() : step_.stats();
}

EvalStep::EvalStep(nn::Module model, bool flush_denormals)
    : eval_(Fn([model](const Tree& params, const Tree& model_state, const Array& images,
                       const Array& labels) {
              nn::ApplyResult out = model.apply(nn::Variables{params, model_state}, images);
              Array loss_sum = sum(nn::softmax_cross_entropy_per_example(out.y, labels));
              return std::make_pair(loss_sum, nn::correct_count(out.y, labels));
            }),
            JitOptions().named("eval_step").flushing_denormals(flush_denormals)) {}

EvalSums EvalStep::run(const TrainState& state, const Array& images, const Array& labels) const {
  auto [loss_sum, correct] =
      eval_(on_one_device(state.params), on_one_device(state.model_state), images, labels);
  return EvalSums{loss_sum, correct};
}

}  // namespace kiln::train
