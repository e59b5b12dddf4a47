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
              TreeSpmdFunction body = [=](const Tree& in) {
                ChunkSums local = device_chunk_sums(model, in[0], in[1], in[2].leaf(), in[3].leaf(),
                                                    in[4].leaf(), masked ? in[5].leaf() : Array());
                return tree_map([](const Array& x) { return psum(x, kDataAxis); }, to_tree(local));
              };
              std::vector<Tree> args = {params, model_state, images, labels, keys};
              std::vector<SpecTree> in_specs = {PartitionSpec(), PartitionSpec(),
                                                split_rows(images.rank()),
                                                split_rows(labels.rank()), split_rows(keys.rank())};
              if (masked) {
                args.push_back(mask);
                in_specs.push_back(split_rows(mask.rank()));
              }
              // The sums are replicated: every device holds them whole.
              return shard_map(body, mesh, SpecTree::list(in_specs),
                               PartitionSpec())(Tree::list(args));
            }),
            JitOptions().named("train_step_sums").flushing_denormals(options.flush_denormals)),
      apply_(ApplyFn([optimizer, mesh = mesh_, skip = options.skip_nonfinite,
                      chunks = options.chunks](const Tree& params, const Tree& model_state,
                                               const Tree& opt_state, const Tree& sums) {
               TreeSpmdFunction body = [=](const Tree& in) {
                 auto [new_params, next_state, new_opt, metrics] =
                     apply_sums(optimizer, skip, in[0], in[1], in[2], from_tree(in[3]), chunks);
                 KILN_CHECK(new_opt.structure() == in[2].structure(),
                            "the optimizer changed its state's structure");
                 return Tree::list({new_params, next_state, new_opt, metrics});
               };
               Tree out = shard_map(body, mesh, PartitionSpec(), PartitionSpec())(
                   Tree::list({params, model_state, opt_state, sums}));
               return StepResult(out[0], out[1], out[2], out[3]);
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
