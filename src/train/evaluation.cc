// The test set's evaluation (evaluation.h).
#include "train/evaluation.h"

#include "train/batches.h"

namespace kiln::train {

void for_each_batch(
    const data::BatchAssembler& batches, DType input_dtype,
    const std::function<void(const Batch& batch, const data::HostBatch& host)>& fn) {
  data::HostBatch host;
  for (int64_t index = 0; index < batches.batches_per_epoch(); ++index) {
    batches.assemble(0, index, host);
    fn(to_arrays(host, input_dtype), host);
  }
}

EvalResult evaluate(const EvalStep& eval, const TrainState& mesh_state,
                    const data::BatchAssembler& batches, DType input_dtype) {
  // Params split over a mesh are gathered once, not for every batch.
  TrainState state{on_one_device(mesh_state.params), on_one_device(mesh_state.model_state), Tree()};
  double loss_sum = 0;
  int64_t correct = 0;
  int64_t labels = 0;  // a language model predicts several per example
  for_each_batch(batches, input_dtype, [&](const Batch& batch, const data::HostBatch& host) {
    EvalSums sums = eval.run(state, batch.images, batch.labels);
    loss_sum += sums.loss_sum.item<double>();
    correct += sums.correct.item<int64_t>();
    labels += static_cast<int64_t>(host.labels.size());
  });
  // load_dataset refuses an empty split, so count > 0.
  auto count = static_cast<double>(labels);
  return EvalResult{loss_sum / count, static_cast<double>(correct) / count};
}

}  // namespace kiln::train
