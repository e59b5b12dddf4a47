// The compiled train and eval steps. One train step is one jit program: forward, loss,
// gradient, optimizer update, and the step's metrics (loss, correct predictions, the
// learning rate, and per parameter whether its gradient is finite, so that a failure can
// name the parameter). Params, model state and optimizer state are donated,
// so each step updates them in place instead of allocating a second copy.
#pragma once

#include <cstdint>
#include <functional>
#include <tuple>

#include "kiln/array.h"
#include "kiln/jit.h"
#include "kiln/nn/module.h"
#include "kiln/optim.h"
#include "kiln/tree.h"

namespace kiln::train {

struct TrainState {
  Tree params;
  Tree model_state;
  Tree opt_state;
};

// What one step reports, still on the device (read later, so the host does not wait on
// the step it just queued).
struct StepMetrics {
  Array loss;       // f32[]: mean over the batch
  Array correct;    // i32[]: correct predictions in the batch
  Array lr;         // f32[]: the learning rate this step used
  Array nonfinite;  // bool[num_params]: the parameter's gradient has a NaN or infinity
};

struct StepOptions {
  // A step whose loss or gradients are not finite leaves the state as it was (the
  // selection is part of the program); otherwise the caller stops the run.
  bool skip_nonfinite = false;
  // Subnormal floats flushed to zero while the step runs (JitOptions::flush_denormals).
  bool flush_denormals = false;
  // Every batch comes with a mask (train.pad_remainder): the loss is the mean over the
  // rows whose mask is 1, and only those count as correct.
  bool masked = false;
};

class TrainStep {
 public:
  TrainStep(nn::Module model, optim::GradientTransformation optimizer, StepOptions options);
  // `mask` (f32[batch], 1 real, 0 padding) is required with StepOptions::masked and must
  // be undefined otherwise.
  StepMetrics run(TrainState& state, const Array& images, const Array& labels, const Array& key,
                  const Array& mask = Array()) const;
  JitStats stats() const;
  // The compiled program run() runs for these arguments (compiling it if run() has not).
  Compiled compiled(const TrainState& state, const Array& images, const Array& labels,
                    const Array& key, const Array& mask = Array()) const;

 private:
  using Result = std::tuple<Tree, Tree, Tree, Tree>;
  using Fn = std::function<Result(const Tree&, const Tree&, const Tree&, const Array&, const Array&,
                                  const Array&, const Array&)>;
  bool masked_;
  Array no_mask_;  // what the unmasked step receives in the mask's place (unused)
  Jitted<Fn> step_;
};

struct EvalSums {
  Array loss_sum;  // f32[]: summed per-example loss
  Array correct;   // i32[]
};

class EvalStep {
 public:
  explicit EvalStep(nn::Module model, bool flush_denormals = false);
  EvalSums run(const TrainState& state, const Array& images, const Array& labels) const;

 private:
  using Fn =
      std::function<std::pair<Array, Array>(const Tree&, const Tree&, const Array&, const Array&)>;
  Jitted<Fn> eval_;
};

}  // namespace kiln::train
