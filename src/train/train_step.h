// The compiled train and eval steps. One train step is one jit program: forward, loss,
// gradient, optimizer update, and the step's metrics (loss, correct predictions, the
// learning rate, and per parameter whether its gradient is finite, so that a failure can
// name the parameter). Params, model state and optimizer state are donated,
// so each step updates them in place instead of allocating a second copy.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "kiln/array.h"
#include "kiln/jit.h"
#include "kiln/nn/module.h"
#include "kiln/nonfinite.h"
#include "kiln/optim.h"
#include "kiln/sharding.h"
#include "kiln/tree.h"

namespace kiln::train {

struct TrainState {
  Tree params;
  Tree model_state;
  Tree opt_state;
  // Dynamic loss scaling's state (docs/precision.md), on the device like the rest:
  // {"good_steps": i32[], "scale": f32[]}; none without dynamic loss scaling.
  Tree loss_scale = Tree();
};

// Loss scaling (docs/precision.md, as jmp's DynamicLossScale and PyTorch's GradScaler):
// the loss is multiplied by the scale before the gradient and the gradients are divided by
// it (in f32) after. "dynamic": a step whose gradient is not finite is skipped and the
// scale multiplied by `backoff` (never below 1); after `growth_interval` good steps in a
// row it is multiplied by `growth`. "fixed": always `initial`. "none": no scaling.
struct LossScaleOptions {
  std::string mode = "none";  // none, fixed, dynamic
  double initial = 32768;
  int64_t growth_interval = 2000;
  double backoff = 0.5;
  double growth = 2;
};

// The loss-scale state a run starts with (none unless `options.mode` is dynamic).
Tree initial_loss_scale(const LossScaleOptions& options);

// What one step reports, still on the device (read later, so the host does not wait on
// the step it just queued).
struct StepMetrics {
  Array loss;        // f32[]: mean over the batch
  Array correct;     // i32[]: correct predictions in the batch
  Array lr;          // f32[]: the learning rate this step used
  Array nonfinite;   // bool[num_params]: the parameter's gradient has a NaN or infinity
  Array loss_scale;  // f32[]: the scale the step multiplied its loss by (undefined: none)
};

struct StepOptions {
  // A step whose loss or gradients are not finite leaves the state as it was (the
  // selection is part of the program); otherwise the caller stops the run.
  bool skip_nonfinite = false;
  // The step's inputs outlive it (no donation), so that a step that went non-finite can be
  // run again one primitive at a time (TrainStep::nonfinite_origin; `--debug-nonfinite`).
  bool keep_inputs = false;
  // Subnormal floats flushed to zero while the step runs (JitOptions::flush_denormals).
  bool flush_denormals = false;
  // Every batch comes with a mask (train.pad_remainder): the loss is the mean over the
  // rows whose mask is 1, and only those count as correct.
  bool masked = false;
  // Data parallel over a mesh of this many devices (axis `data`; 0: one device, no mesh).
  // The batch is split into `chunks` equal chunks; each device takes chunks / data_devices
  // of them, and their gradients are added in the pairwise tree over the chunk index that
  // psum continues across the devices, so that the same config gives the same bits on
  // every power-of-two mesh size that divides `chunks` (docs/training.md, *Data parallel*).
  int64_t data_devices = 0;
  int64_t chunks = 4;
  // Without a mesh (data_devices 0): the batch is split into this many chunks, added as a
  // mesh of one device with as many chunks adds them (the same bits), each chunk's
  // activations and gradient freed before the next: gradient accumulation
  // (train.accumulate) in the memory of one chunk.
  int64_t accumulate = 1;
  // With a mesh: params and optimizer state split over the devices along their first
  // dimension where it divides (FSDP); the same bits as replicated (mesh.shard_params).
  bool shard_params = false;
  // Tensor parallel over a second mesh axis `model` of this many devices (the mesh then
  // has data_devices x model_devices): `tensor_parallel` gives the spec of each split
  // param by its path (the column- and row-split dense layers' kernels and biases), and
  // the loss each device differentiates is divided by model_devices (DenseOptions::parallel).
  int64_t model_devices = 1;
  std::map<std::string, PartitionSpec> tensor_parallel;
  // An MPI job of this many processes (0: none), of which this is `process_rank`: the
  // global mesh of data_devices is split evenly among them, each running its share of the
  // chunks on data_devices / processes local devices (process_parallel_step.h).
  int64_t processes = 0;
  int64_t process_rank = 0;
  // The dtype the layers compute in (model.compute_dtype; precision.h).
  DType compute = DType::f32;
  LossScaleOptions loss_scale;
  // A skipped step (non-finite, or a loss-scale overflow) still advances the optimizer's
  // step count, and with it the learning-rate schedule (false: the count stays, as params
  // and optimizer state do).
  bool skipped_steps_advance_schedule = false;
  // DP-SGD ([privacy], private_step.cc): on when clip_norm > 0. Each example's gradient
  // clipped to L2 norm clip_norm, summed, Gaussian noise of standard deviation
  // noise_multiplier x clip_norm added, divided by expected_batch; per-example gradients
  // examples_per_chunk rows at a time. Needs `masked` (Poisson batches are padded).
  struct Privacy {
    double clip_norm = 0;
    double noise_multiplier = 0;
    double expected_batch = 0;
    int64_t examples_per_chunk = 1;
    bool enabled() const { return clip_norm > 0; }
  };
  Privacy privacy;
};

// Whether a params or optimizer-state leaf of this shape is split over `devices` with
// StepOptions::shard_params: along its first dimension, when that divides evenly.
bool splits_over(const Shape& shape, int64_t devices);

// Where each params and optimizer-state leaf lives on the step's mesh, in leaf order.
struct StateLayout {
  std::vector<PartitionSpec> params;
  std::vector<PartitionSpec> opt;
};
// Params: the spec StepOptions::tensor_parallel names for its path, else split along the
// first dimension over `data` with shard_params where it divides, else replicated. An
// optimizer-state leaf takes the spec of the param whose path ends its own (Adam's
// "mu/dense_1/kernel" that of "dense_1/kernel") and whose shape it has; one that matches no
// param follows the shard_params rule.
StateLayout state_layout(const Tree& params, const Tree& opt_state, const StepOptions& options);

// The step's function before jit: (params, model state, optimizer state, loss-scale state,
// images, labels, key, mask) to (params, model state, optimizer state, loss-scale state,
// metrics).
using StepResult = std::tuple<Tree, Tree, Tree, Tree, Tree>;
using StepFunction =
    std::function<StepResult(const Tree&, const Tree&, const Tree&, const Tree&, const Array&,
                             const Array&, const Array&, const Array&)>;

// The factor a step multiplies its loss by: the state's scale (dynamic), the constant
// (fixed), or undefined (none).
Array step_loss_scale(const LossScaleOptions& options, const Tree& loss_scale_state);

// The data-parallel step (data_parallel_step.cc).
StepFunction data_parallel_step(nn::Module model, optim::GradientTransformation optimizer,
                                StepOptions options);
// Gradient accumulation on one device, without a mesh (StepOptions::accumulate > 1).
StepFunction accumulating_step(nn::Module model, optim::GradientTransformation optimizer,
                               StepOptions options);
// DP-SGD's step on one device (StepOptions::privacy; private_step.cc).
StepFunction private_step(nn::Module model, optim::GradientTransformation optimizer,
                          StepOptions options);
// What both steps do once the batch's loss and gradients are known: the gradients unscaled
// (with loss scaling; `grads` are those of the loss times step_loss_scale), the optimizer
// update, the non-finite check (and the skip it may ask for), the loss scale's update, and
// the metrics. `global_flags` combines the per-parameter non-finite flags of gradients
// split over devices.
StepResult finish_step(const optim::GradientTransformation& optimizer, const StepOptions& options,
                       const Tree& params, const Tree& model_state, const Tree& opt_state,
                       const Tree& loss_scale, const Array& loss, const Array& correct,
                       const Tree& grads, const Tree& new_model_state,
                       const std::function<Array(const Array&)>& global_flags = {});

class ProcessParallelStep;

// Leaf i of `tree` on `mesh` by specs[i] (every leaf replicated when `specs` is empty); a
// leaf already placed so is returned as it is.
Tree placed_on(const Tree& tree, const Mesh& mesh, const std::vector<PartitionSpec>& specs = {});

class TrainStep {
 public:
  TrainStep(nn::Module model, optim::GradientTransformation optimizer, StepOptions options);
  // `mask` (f32[batch], 1 real, 0 padding) is required with StepOptions::masked and must
  // be undefined otherwise.
  StepMetrics run(TrainState& state, const Array& images, const Array& labels, const Array& key,
                  const Array& mask = Array()) const;
  JitStats stats() const;
  // The step run again on `before` (the state it started from: StepOptions::keep_inputs)
  // one primitive at a time (find_nonfinite, kiln/nonfinite.h): the first equation that
  // made a NaN or an infinity. One device only (no mesh, no MPI job).
  NonFiniteOrigin nonfinite_origin(const TrainState& before, const Array& images,
                                   const Array& labels, const Array& key,
                                   const Array& mask = Array()) const;
  // The compiled program run() runs for these arguments (compiling it if run() has not).
  Compiled compiled(const TrainState& state, const Array& images, const Array& labels,
                    const Array& key, const Array& mask = Array()) const;

 private:
  using Fn = StepFunction;
  bool masked_;
  int64_t chunks_;            // 0: not data parallel
  int64_t accumulate_;        // micro-batches of a one-device step (StepOptions::accumulate)
  std::optional<Mesh> mesh_;  // the data-parallel step's
  StepOptions options_;
  // Where the state's leaves live on mesh_, known at the first step (the trees' structure
  // does not change between steps).
  mutable std::optional<StateLayout> layout_;
  Array no_mask_;  // what the unmasked step receives in the mask's place (unused)
  Fn function_;    // what step_ compiles, for nonfinite_origin
  Jitted<Fn> step_;
  std::shared_ptr<const ProcessParallelStep> processes_;  // instead of step_ in an MPI job
};

// Each leaf whole on one device: a replicated leaf's block on the mesh's first device (no
// copy), a split one gathered there.
Tree on_one_device(const Tree& tree);

struct EvalSums {
  Array loss_sum;  // f32[]: summed per-example loss
  Array correct;   // i32[]
};

class EvalStep {
 public:
  explicit EvalStep(nn::Module model, bool flush_denormals = false, DType compute = DType::f32);
  EvalSums run(const TrainState& state, const Array& images, const Array& labels) const;
  // The compiled program run() runs for these arguments (compiling it if run() has not).
  Compiled compiled(const TrainState& state, const Array& images, const Array& labels) const;

 private:
  using Fn =
      std::function<std::pair<Array, Array>(const Tree&, const Tree&, const Array&, const Array&)>;
  Jitted<Fn> eval_;
};

}  // namespace kiln::train
