// ProcessParallelStep (process_parallel_step.h).
#include "train/process_parallel_step.h"

#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "dist/processes.h"
#include "kiln/device.h"
#include "kiln/error.h"
#include "kiln/ops.h"
#include "kiln/random.h"
#include "train/data_parallel_parts.h"

namespace kiln::train {
namespace {

std::vector<Array> leaves_of(const std::vector<const Tree*>& trees) {
  std::vector<Array> out;
  for (const Tree* t : trees) {
    std::vector<Array> leaves = t->leaves();
    out.insert(out.end(), leaves.begin(), leaves.end());
  }
  return out;
}

JitStats combined(const JitStats& a, const JitStats& b) {
  JitStats out = a;
  out.calls += b.calls;
  out.compiles += b.compiles;
  out.cache_hits += b.cache_hits;
  out.compile_seconds += b.compile_seconds;
  out.last_compile_seconds = b.last_compile_seconds;
  out.donations_used += b.donations_used;
  out.donations_unusable += b.donations_unusable;
  out.compile_reasons.insert(out.compile_reasons.end(), b.compile_reasons.begin(),
                             b.compile_reasons.end());
  return out;
}

}  // namespace

Tree sum_over_processes(const Tree& local, std::string_view what) {
  std::vector<Array> leaves = on_one_device(local).leaves();
  size_t total_bytes = 0;
  for (const Array& leaf : leaves) total_bytes += static_cast<size_t>(leaf.size_bytes());
  std::string mine;
  mine.reserve(total_bytes);
  for (const Array& leaf : leaves) {
    HostArray host = leaf.to_host();
    mine.append(reinterpret_cast<const char*>(host.bytes.data()), host.bytes.size());
  }
  std::vector<std::string> every = dist::all_gather(what, mine);
  std::vector<std::vector<Array>> per_rank;
  for (size_t r = 0; r < every.size(); ++r) {
    if (every[r].size() != mine.size()) {
      fail(kUnknownSite, fmt::format("exchange '{}': rank {} sent {} bytes, rank {} {}: the ranks "
                                     "do not train the same model",
                                     what, r, every[r].size(), dist::rank(), mine.size()));
    }
    std::vector<Array> arrays;
    size_t at = 0;
    for (const Array& leaf : leaves) {
      AbstractValue aval(leaf.shape(), leaf.dtype());
      arrays.push_back(from_host_bytes(every[r].data() + at, aval, &device(0), kUnknownSite));
      at += static_cast<size_t>(leaf.size_bytes());
    }
    per_rank.push_back(std::move(arrays));
  }
  auto add = [](const std::vector<Array>& a, const std::vector<Array>& b) {
    std::vector<Array> out;
    for (size_t i = 0; i < a.size(); ++i) out.push_back(a[i] + b[i]);
    return out;
  };
  std::vector<Array> total = per_rank.size() == 1 ? per_rank[0] : pairwise_sum(per_rank, add);
  return unflatten(local.structure(), total);
}

ProcessParallelStep::ProcessParallelStep(nn::Module model, optim::GradientTransformation optimizer,
                                         StepOptions options)
    : options_(options),
      mesh_({{kDataAxis, options.data_devices / options.processes}}),
      no_mask_(zeros({})),
      sums_(SumsFn([model, mesh = mesh_, masked = options.masked](
                       const Tree& params, const Tree& model_state, const Array& images,
                       const Array& labels, const Array& keys, const Array& mask) {
              TreeDef params_def = params.structure(), state_def = model_state.structure();
              const auto num_params = static_cast<size_t>(params_def.num_leaves());
              const auto num_state = static_cast<size_t>(state_def.num_leaves());
              // The structure of the body's result, known once shard_map has traced it.
              auto sums_like = std::make_shared<Tree>();
              SpmdFunction body = [=](const std::vector<Array>& in) {
                std::span<const Array> all(in);
                Tree p = unflatten(params_def, all.subspan(0, num_params));
                Tree state = unflatten(state_def, all.subspan(num_params, num_state));
                size_t at = num_params + num_state;
                ChunkSums local = device_chunk_sums(model, p, state, in[at], in[at + 1], in[at + 2],
                                                    masked ? in[at + 3] : Array());
                Tree summed =
                    tree_map([](const Array& x) { return psum(x, kDataAxis); }, to_tree(local));
                *sums_like = summed;
                return summed.leaves();
              };
              std::vector<Array> args = leaves_of({&params, &model_state});
              std::vector<PartitionSpec> in_specs(args.size(), PartitionSpec());
              for (const Array* x : {&images, &labels, &keys}) {
                args.push_back(*x);
                in_specs.push_back(split_rows(x->rank()));
              }
              if (masked) {
                args.push_back(mask);
                in_specs.push_back(split_rows(mask.rank()));
              }
              // One replicated result per leaf of the sums: as many as params + state
              // leaves plus loss, correct and count.
              std::vector<PartitionSpec> out_specs(num_params + num_state + 3, PartitionSpec());
              std::vector<Array> out = shard_map(body, mesh, in_specs, out_specs)(args);
              return unflatten(sums_like->structure(), out);
            }),
            JitOptions().named("train_step_sums").flushing_denormals(options.flush_denormals)),
      apply_(ApplyFn([optimizer, mesh = mesh_, skip = options.skip_nonfinite,
                      chunks = options.chunks](const Tree& params, const Tree& model_state,
                                               const Tree& opt_state, const Tree& sums) {
               TreeDef params_def = params.structure(), state_def = model_state.structure(),
                       opt_def = opt_state.structure(), sums_def = sums.structure();
               const auto num_params = static_cast<size_t>(params_def.num_leaves());
               const auto num_state = static_cast<size_t>(state_def.num_leaves());
               const auto num_opt = static_cast<size_t>(opt_def.num_leaves());
               const auto num_sums = static_cast<size_t>(sums_def.num_leaves());
               SpmdFunction body = [=](const std::vector<Array>& in) {
                 std::span<const Array> all(in);
                 Tree p = unflatten(params_def, all.subspan(0, num_params));
                 Tree state = unflatten(state_def, all.subspan(num_params, num_state));
                 Tree opt = unflatten(opt_def, all.subspan(num_params + num_state, num_opt));
                 Tree s = unflatten(sums_def, all.subspan(num_params + num_state + num_opt));
                 auto [new_params, next_state, new_opt, metrics] =
                     apply_sums(optimizer, skip, p, state, opt, from_tree(s), chunks);
                 KILN_CHECK(new_opt.structure() == opt_def,
                            "the optimizer changed its state's structure");
                 std::vector<Array> out = leaves_of({&new_params, &next_state, &new_opt});
                 for (const char* name : {"correct", "loss", "lr", "nonfinite"}) {
                   out.push_back(metrics[name].leaf());
                 }
                 return out;
               };
               std::vector<Array> args = leaves_of({&params, &model_state, &opt_state, &sums});
               std::vector<PartitionSpec> in_specs(args.size(), PartitionSpec());
               std::vector<PartitionSpec> out_specs(num_params + num_state + num_opt + 4,
                                                    PartitionSpec());
               KILN_CHECK(args.size() == num_params + num_state + num_opt + num_sums);
               std::vector<Array> out = shard_map(body, mesh, in_specs, out_specs)(args);
               std::span<const Array> all(out);
               size_t at = num_params + num_state + num_opt;
               Tree metrics = Tree::dict({{"correct", out[at]},
                                          {"loss", out[at + 1]},
                                          {"lr", out[at + 2]},
                                          {"nonfinite", out[at + 3]}});
               return StepResult(unflatten(params_def, all.subspan(0, num_params)),
                                 unflatten(state_def, all.subspan(num_params, num_state)),
                                 unflatten(opt_def, all.subspan(num_params + num_state, num_opt)),
                                 metrics);
             }),
             JitOptions()
                 .named("train_step_apply")
                 .donating({0, 1, 2})
                 .flushing_denormals(options.flush_denormals)) {
  KILN_CHECK(options.processes > 0 && options.data_devices % options.processes == 0 &&
             options.chunks % options.data_devices == 0 && !options.shard_params &&
             options.model_devices == 1);
}

ProcessParallelStep::LocalRows ProcessParallelStep::local_rows(const Array& images,
                                                               const Array& labels,
                                                               const Array& key,
                                                               const Array& mask) const {
  const int64_t processes = options_.processes, rank = options_.process_rank;
  const int64_t batch = images.dim(0), chunks = options_.chunks;
  const int64_t begin = rank * batch / processes, end = (rank + 1) * batch / processes;
  Array keys = random::split(key, chunks);
  return LocalRows{rows(images, begin, end), rows(labels, begin, end),
                   rows(keys, rank * chunks / processes, (rank + 1) * chunks / processes),
                   options_.masked ? rows(mask, begin, end) : no_mask_};
}

StepResult ProcessParallelStep::run(const TrainState& state, const Array& images,
                                    const Array& labels, const Array& key,
                                    const Array& mask) const {
  LocalRows local = local_rows(images, labels, key, mask);
  Tree sums =
      sums_(state.params, state.model_state, local.images, local.labels, local.keys, local.mask);
  Tree total = sum_over_processes(sums, "train step sums");
  // Replicated on this process's devices, as the apply half's other arguments are.
  total = placed_on(total, mesh_);
  return apply_(state.params, state.model_state, state.opt_state, total);
}

Compiled ProcessParallelStep::compiled(const TrainState& state, const Array& images,
                                       const Array& labels, const Array& key,
                                       const Array& mask) const {
  LocalRows local = local_rows(images, labels, key, mask);
  return sums_.compile(state.params, state.model_state, local.images, local.labels, local.keys,
                       local.mask);
}

JitStats ProcessParallelStep::stats() const {
  return combined(sums_.stats(), apply_.stats());
}

}  // namespace kiln::train
