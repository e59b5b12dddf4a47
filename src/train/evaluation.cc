// The test set's evaluation (evaluation.h).
#include "train/evaluation.h"

#include <cstring>
#include <string>
#include <vector>

#include "base/check.h"
#include "dist/processes.h"
#include "kiln/error.h"
#include "train/batches.h"

namespace kiln::train {

void for_each_batch(const data::BatchAssembler& batches, DType input_dtype,
                    const std::function<void(const Batch& batch, const data::HostBatch& host)>& fn,
                    int64_t first, int64_t stride) {
  data::HostBatch host;
  for (int64_t index = first; index < batches.batches_per_epoch(); index += stride) {
    batches.assemble(0, index, host);
    fn(to_arrays(host, input_dtype), host);
  }
}

namespace {

// One evaluation batch's figures, as its rank computed them.
struct BatchFigures {
  double loss_sum = 0;
  int64_t correct = 0;
  int64_t labels = 0;
};

// Every rank's figures for its batches (index % ranks == rank) sent to every rank, so that
// each holds the whole table.
void share_figures(std::vector<BatchFigures>& figures, int64_t me, int64_t ranks) {
  std::string mine;
  for (size_t index = static_cast<size_t>(me); index < figures.size();
       index += static_cast<size_t>(ranks)) {
    mine.append(reinterpret_cast<const char*>(&figures[index]), sizeof(BatchFigures));
  }
  std::vector<std::string> every = dist::all_gather("evaluation", mine);
  for (size_t rank = 0; rank < every.size(); ++rank) {
    size_t at = 0;
    for (size_t index = rank; index < figures.size(); index += every.size()) {
      KILN_CHECK(at + sizeof(BatchFigures) <= every[rank].size(),
                 "a rank evaluated fewer batches than its share");
      std::memcpy(&figures[index], every[rank].data() + at, sizeof(BatchFigures));
      at += sizeof(BatchFigures);
    }
  }
}

}  // namespace

// In an MPI job each rank evaluates every P-th batch and the ranks share their figures,
// which every rank then adds up in batch order: the same numbers, in the same order, as
// one process evaluating them all.
EvalResult evaluate(const EvalStep& eval, const TrainState& mesh_state,
                    const data::BatchAssembler& batches, DType input_dtype) {
  // Params split over a mesh are gathered once, not for every batch.
  TrainState state{on_one_device(mesh_state.params), on_one_device(mesh_state.model_state), Tree()};
  const int64_t ranks = dist::size(), me = dist::rank();
  std::vector<BatchFigures> figures(static_cast<size_t>(batches.batches_per_epoch()));
  size_t index = static_cast<size_t>(me);
  for_each_batch(
      batches, input_dtype,
      [&](const Batch& batch, const data::HostBatch& host) {
        EvalSums sums = eval.run(state, batch.images, batch.labels);
        // A language model predicts several labels per example.
        figures[index] = {sums.loss_sum.item<double>(), sums.correct.item<int64_t>(),
                          static_cast<int64_t>(host.labels.size())};
        index += static_cast<size_t>(ranks);
      },
      me, ranks);
  if (ranks > 1) share_figures(figures, me, ranks);
  double loss_sum = 0;
  int64_t correct = 0, labels = 0;
  for (const BatchFigures& batch : figures) {
    loss_sum += batch.loss_sum;
    correct += batch.correct;
    labels += batch.labels;
  }
  // load_dataset refuses an empty split, so labels > 0.
  auto count = static_cast<double>(labels);
  return EvalResult{loss_sum / count, static_cast<double>(correct) / count};
}

}  // namespace kiln::train
