// The data-parallel step of an MPI job (mpirun -np P kiln train): the global mesh is P
// processes x mesh.data / P local devices. Each process takes its rows of the batch
// (chunks [rank * C / P, (rank + 1) * C / P) of the C chunks) and runs the step in two
// compiled halves with one exchange between them:
//
//   sums    shard_map over the local devices: each device's chunks as in one process
//           (device_chunk_sums), psum over the local devices;
//   (host)  every rank's sums to every rank (dist::all_gather), added in rank order in the
//           same pairwise tree, which continues the tree over the chunk index: so P
//           processes give the bits of one process with P times the devices;
//   apply   shard_map over the local devices: the mean, the optimizer update, the metrics,
//           the same on every rank, so params stay replicated without being sent.
#pragma once

#include <functional>

#include "kiln/jit.h"
#include "kiln/sharding.h"
#include "train/train_step.h"

namespace kiln::train {

class ProcessParallelStep {
 public:
  // options.processes > 0; options.data_devices is the global mesh size.
  ProcessParallelStep(nn::Module model, optim::GradientTransformation optimizer,
                      StepOptions options);

  // The whole batch as every rank loaded it; the state replicated on this process's mesh
  // (placed there by the caller).
  StepResult run(const TrainState& state, const Array& images, const Array& labels,
                 const Array& key, const Array& mask) const;
  Compiled compiled(const TrainState& state, const Array& images, const Array& labels,
                    const Array& key, const Array& mask) const;
  JitStats stats() const;
  const Mesh& local_mesh() const { return mesh_; }

 private:
  using SumsFn = std::function<Tree(const Tree&, const Tree&, const Tree&, const Array&,
                                    const Array&, const Array&, const Array&)>;
  using ApplyFn =
      std::function<StepResult(const Tree&, const Tree&, const Tree&, const Tree&, const Tree&)>;
  struct LocalRows {
    Array images, labels, keys, mask;
  };
  LocalRows local_rows(const Array& images, const Array& labels, const Array& key,
                       const Array& mask) const;

  StepOptions options_;
  Mesh mesh_;
  Array no_mask_;
  Jitted<SumsFn> sums_;
  Jitted<ApplyFn> apply_;
};

// `local` (replicated on this process's devices) summed over every rank in rank order, in
// the pairwise tree; the result on device 0. `what` names the exchange in errors.
Tree sum_over_processes(const Tree& local, std::string_view what);

}  // namespace kiln::train
