// What the data-parallel steps share: in one process (data_parallel_step.cc) and across
// the processes of an MPI job (process_parallel_step.cc). Both add the chunks' sums in the
// same pairwise tree over the chunk index, so that where the tree is cut (between chunks of
// one device, between devices, between processes) does not change the bits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "kiln/array.h"
#include "kiln/nn/module.h"
#include "kiln/sharding.h"
#include "kiln/tree.h"
#include "train/train_step.h"

namespace kiln::train {

inline constexpr const char* kDataAxis = "data";
// Tensor parallelism's axis (mesh.model): the split dense layers' DenseOptions::parallel_axis.
inline constexpr const char* kModelAxis = "model";

// The step's mesh: `data` devices, times `model` when tensor parallel.
Mesh step_mesh(int64_t data_devices, int64_t model_devices);

// Whether a spec splits no dimension.
bool is_replicated(const PartitionSpec& spec);
// Whether a spec splits a dimension over `axis`.
bool splits_over_axis(const PartitionSpec& spec, const std::string& axis);

// parts[lo, hi) added as the collectives add: the left part the largest power of two
// below the count.
template <typename T, typename Add>
T pairwise_sum(const std::vector<T>& parts, size_t lo, size_t hi, const Add& add) {
  if (hi - lo == 1) return parts[lo];
  size_t left = 1;
  while (left * 2 < hi - lo) left *= 2;
  return add(pairwise_sum(parts, lo, lo + left, add), pairwise_sum(parts, lo + left, hi, add));
}

template <typename T, typename Add>
T pairwise_sum(const std::vector<T>& parts, const Add& add) {
  return pairwise_sum(parts, 0, parts.size(), add);
}

// pairwise_sum's tree built as the parts arrive, so that a traced step holds at most
// log2(n) + 1 partial sums (of a gradient each) instead of every chunk's: a part is added to
// the latest sum of as many parts as itself, as a binary counter carries, and total() adds
// what is left from the right. The same operands in the same order as pairwise_sum.
template <typename T, typename Add>
class PairwiseAccumulator {
 public:
  explicit PairwiseAccumulator(Add add) : add_(std::move(add)) {}

  void push(T part) {
    T sum = std::move(part);
    size_t parts = 1;
    while (!sums_.empty() && sums_.back().parts == parts) {
      sum = add_(sums_.back().sum, sum);
      parts *= 2;
      sums_.pop_back();
    }
    sums_.push_back(Partial{std::move(sum), parts});
  }

  // The sum of every part pushed (at least one).
  T total() const {
    T sum = sums_.back().sum;
    for (size_t i = sums_.size() - 1; i-- > 0;) sum = add_(sums_[i].sum, sum);
    return sum;
  }

 private:
  struct Partial {
    T sum;
    size_t parts;
  };
  Add add_;
  std::vector<Partial> sums_;
};

Tree tree_add(const Tree& a, const Tree& b);

// Rows [begin, end) of x, whatever its rank.
Array rows(const Array& x, int64_t begin, int64_t end);

// A PartitionSpec splitting the first of `rank` dimensions over the data axis.
PartitionSpec split_rows(int64_t rank);

// What chunks contribute: sums, divided only once every chunk is in.
struct ChunkSums {
  Array loss;     // f32[]: summed per-label loss (masked rows add exact zeros)
  Array correct;  // i32[]
  Array count;    // f32[]: the labels that count (the rows that do, times labels per row)
  Tree grads;     // of `loss`
  Tree state;     // the model state after each chunk, summed (batch norm's statistics)
};

ChunkSums add_sums(const ChunkSums& a, const ChunkSums& b);

// Inside a shard_map body: the sums over this device's chunks (keys.dim(0) of them, the
// rows of x split evenly among them), each with the whole params `params`, added in the
// pairwise tree over the chunk index. `mask` is undefined unless masked.
// `loss_scale` multiplies the loss that is differentiated, not the one summed (tensor
// parallelism's 1 / model_devices), and so does `scale` when defined (loss scaling's, an
// f32 scalar: the gradients are then those of the scaled loss). The layers compute in
// `compute` (precision.h).
ChunkSums device_chunk_sums(const nn::Module& model, const Tree& params, const Tree& state,
                            const Array& x, const Array& y, const Array& keys, const Array& mask,
                            double loss_scale = 1, DType compute = DType::f32,
                            const Array& scale = Array());

// The step's end, once `sums` holds every chunk's: the mean loss and gradient, batch norm's
// statistics averaged over the `chunks`, the optimizer update and the loss scale's
// (finish_step). `global_flags` as finish_step's.
StepResult apply_sums(const optim::GradientTransformation& optimizer, const StepOptions& options,
                      const Tree& params, const Tree& model_state, const Tree& opt_state,
                      const Tree& loss_scale, const ChunkSums& sums,
                      const std::function<Array(const Array&)>& global_flags = {});

// DP-SGD (private_step.cc): the step key's two parts, the chunks' keys (each chunk's
// examples draw their dropout from its key split per row) and the noise's key, which every
// device holds whole.
struct PrivateKeys {
  Array chunks;  // [chunks, 2]
  Array noise;
};
PrivateKeys private_keys(const Array& key, int64_t chunks);

// DP-SGD's sums over this device's chunks (keys.dim(0) of them, the rows split evenly), in
// the pairwise tree: per chunk, each example's gradient by vmap, clipped to L2 norm
// `clip_norm` and multiplied by its mask, summed. `loss` sums the real examples' losses (each
// the mean over its labels) and `count` counts the real examples; no state.
ChunkSums device_private_sums(const nn::Module& model, const Tree& params, const Tree& state,
                              const Array& x, const Array& y, const Array& keys, const Array& mask,
                              DType compute, double clip_norm);

// DP-SGD's end of a step, once `sums` holds every chunk's: noise N(0, (sigma C)^2) per
// element drawn from `noise_key` (the same on every device, so added once), (sum + noise) /
// the expected batch, the real examples' mean loss, then finish_step.
StepResult apply_private_sums(const optim::GradientTransformation& optimizer,
                              const StepOptions& options, const Tree& params,
                              const Tree& model_state, const Tree& opt_state,
                              const Tree& loss_scale, const ChunkSums& sums, const Array& noise_key,
                              const std::function<Array(const Array&)>& global_flags = {});

// ChunkSums as one Tree and back (for jit signatures and the exchange between processes).
Tree to_tree(const ChunkSums& sums);
ChunkSums from_tree(const Tree& tree);

}  // namespace kiln::train
