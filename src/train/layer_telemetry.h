// [telemetry]: every N steps, statistics of each layer of a sequential model (of each stage
// of a GPT-2: the embedding, every block, the final norm) on that step's batch and state,
// before the step runs: the activations' mean and standard deviation, the
// fraction of dead units of a ReLU (zero for every example of the batch), the fraction of
// saturated outputs of a sigmoid or tanh, and each parameterised layer's gradient norm and
// update-to-parameter ratio (the norm of the optimizer's update over the norm of the
// params). One jitted program, which changes nothing of the run: the step that follows gets
// the same inputs and computes the same bits.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kiln/array.h"
#include "kiln/jit.h"
#include "kiln/optim.h"
#include "kiln/tree.h"
#include "train/config.h"
#include "train/train_step.h"

namespace kiln::train {

// One layer's figures; a statistic that does not apply to it is absent.
struct LayerStats {
  std::string layer;                     // its path: "dense_1", "relu_2"; a GPT-2's "h_3"
  std::map<std::string, double> values;  // "activation_mean", "dead_fraction", "grad_norm", ...
};

class LayerTelemetry {
 public:
  // nullopt: a model kind telemetry does not cover (it covers [[model.layers]] models and
  // GPT-2s).
  static std::optional<LayerTelemetry> for_model(const ModelConfig& model,
                                                 const optim::GradientTransformation& optimizer);

  // The statistics for this state and batch (computed in f32, on one device).
  std::vector<LayerStats> measure(const TrainState& state, const Array& images, const Array& labels,
                                  const Array& key) const;

 private:
  using Fn = std::function<Tree(const Tree&, const Tree&, const Tree&, const Array&, const Array&,
                                const Array&)>;
  LayerTelemetry(std::vector<std::string> names, Fn fn);
  std::vector<std::string> names_;  // the layers' paths, in order
  Jitted<Fn> program_;
};

}  // namespace kiln::train
