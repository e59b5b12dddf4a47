// ProcessParallelStep (process_parallel_step.h).
#include "train/process_parallel_step.h"

#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "base/check.h"
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

namespace {

// The elements of a leaf of `elements` that rank `owner` of `ranks` reduces: a contiguous
// range, the same on every rank.
std::pair<int64_t, int64_t> owned_range(int64_t elements, int64_t owner, int64_t ranks) {
  return {elements * owner / ranks, elements * (owner + 1) / ranks};
}

// Each leaf's bytes, read to the host once.
std::vector<HostArray> host_leaves(const std::vector<Array>& leaves) {
  std::vector<HostArray> hosts;
  for (const Array& leaf : leaves) hosts.push_back(leaf.to_host());
  return hosts;
}

// For `owner`: its range of every leaf, one after the other.
std::string slices_for(const std::vector<HostArray>& hosts, int64_t owner, int64_t ranks) {
  std::string out;
  for (const HostArray& host : hosts) {
    const int64_t size = dtype_size(host.aval.dtype);
    auto [begin, end] = owned_range(host.aval.shape.num_elements(), owner, ranks);
    out.append(reinterpret_cast<const char*>(host.bytes.data()) + begin * size,
               static_cast<size_t>((end - begin) * size));
  }
  return out;
}

// Rank `owner`'s part of every leaf, as 1-D arrays on device 0, from `bytes` laid out by
// slices_for; a part of the wrong length means the ranks train different models.
std::vector<Array> parts_from(const std::string& bytes, const std::vector<HostArray>& like,
                              int64_t owner, int64_t ranks, int from, std::string_view what) {
  std::vector<Array> parts;
  size_t at = 0;
  for (const HostArray& host : like) {
    auto [begin, end] = owned_range(host.aval.shape.num_elements(), owner, ranks);
    const size_t length = static_cast<size_t>((end - begin) * dtype_size(host.aval.dtype));
    if (at + length > bytes.size()) break;
    parts.push_back(from_host_bytes(bytes.data() + at,
                                    AbstractValue(Shape{end - begin}, host.aval.dtype), &device(0),
                                    kUnknownSite));
    at += length;
  }
  if (parts.size() != like.size() || at != bytes.size()) {
    fail(kUnknownSite, fmt::format("exchange '{}': rank {} sent {} bytes where rank {} expected "
                                   "{}: the ranks do not train the same model",
                                   what, from, bytes.size(), dist::rank(), at));
  }
  return parts;
}

}  // namespace

// A reduce-scatter, then an all-gather: each rank adds up its own range of every leaf from
// every rank's contribution, in rank order in the pairwise tree (so each element is the
// sum the whole-tree exchange gave, bit for bit), and the ranks then share their sums.
// Each rank sends 2 (P - 1) / P of the tree's bytes, however many ranks there are.
Tree sum_over_processes(const Tree& local, std::string_view what) {
  std::vector<Array> leaves = on_one_device(local).leaves();
  std::vector<HostArray> hosts = host_leaves(leaves);
  const int64_t ranks = dist::size(), me = dist::rank();
  std::vector<std::string> outgoing;
  for (int64_t owner = 0; owner < ranks; ++owner) {
    outgoing.push_back(slices_for(hosts, owner, ranks));
  }
  std::vector<std::string> incoming =
      dist::all_to_all(fmt::format("{} (reduce-scatter)", what), outgoing);
  std::vector<std::vector<Array>> contributions;
  for (size_t from = 0; from < incoming.size(); ++from) {
    contributions.push_back(
        parts_from(incoming[from], hosts, me, ranks, static_cast<int>(from), what));
  }
  auto add = [](const std::vector<Array>& a, const std::vector<Array>& b) {
    std::vector<Array> out;
    for (size_t i = 0; i < a.size(); ++i) out.push_back(a[i] + b[i]);
    return out;
  };
  std::vector<Array> mine = pairwise_sum(contributions, add);
  std::string my_sums;
  for (const HostArray& sum : host_leaves(mine)) {
    my_sums.append(reinterpret_cast<const char*>(sum.bytes.data()), sum.bytes.size());
  }
  std::vector<std::string> every = dist::all_gather(fmt::format("{} (all-gather)", what), my_sums);
  // Each leaf whole again: its ranges in rank order.
  std::vector<std::vector<Array>> by_owner;
  for (int64_t owner = 0; owner < ranks; ++owner) {
    by_owner.push_back(parts_from(every[static_cast<size_t>(owner)], hosts, owner, ranks,
                                  static_cast<int>(owner), what));
  }
  std::vector<Array> total;
  for (size_t leaf = 0; leaf < leaves.size(); ++leaf) {
    std::vector<Array> pieces;
    for (const std::vector<Array>& parts : by_owner) pieces.push_back(parts[leaf]);
    Array whole = pieces.size() == 1 ? pieces[0] : concatenate(pieces, 0);
    total.push_back(reshape(whole, leaves[leaf].shape()));
  }
  return unflatten(local.structure(), total);
}

ProcessParallelStep::ProcessParallelStep(nn::Module model, optim::GradientTransformation optimizer,
                                         StepOptions options)
    : options_(options),
      mesh_({{kDataAxis, options.data_devices / options.processes}}),
      no_mask_(zeros({})),
      sums_(SumsFn([model, mesh = mesh_, options](const Tree& params, const Tree& model_state,
                                                  const Tree& loss_scale, const Array& images,
                                                  const Array& labels, const Array& keys,
                                                  const Array& mask) {
              const bool masked = options.masked;
              TreeSpmdFunction body = [=](const Tree& in) {
                ChunkSums local =
                    device_chunk_sums(model, in[0], in[1], in[3].leaf(), in[4].leaf(), in[5].leaf(),
                                      masked ? in[6].leaf() : Array(), 1, options.compute,
                                      step_loss_scale(options.loss_scale, in[2]));
                return tree_map([](const Array& x) { return psum(x, kDataAxis); }, to_tree(local));
              };
              std::vector<Tree> args = {params, model_state, loss_scale, images, labels, keys};
              std::vector<SpecTree> in_specs = {
                  PartitionSpec(),           PartitionSpec(),           PartitionSpec(),
                  split_rows(images.rank()), split_rows(labels.rank()), split_rows(keys.rank())};
              if (masked) {
                args.push_back(mask);
                in_specs.push_back(split_rows(mask.rank()));
              }
              // The sums are replicated: every device holds them whole.
              return shard_map(body, mesh, SpecTree::list(in_specs),
                               PartitionSpec())(Tree::list(args));
            }),
            JitOptions().named("train_step_sums").flushing_denormals(options.flush_denormals)),
      apply_(ApplyFn([optimizer, mesh = mesh_, options](const Tree& params, const Tree& model_state,
                                                        const Tree& opt_state,
                                                        const Tree& loss_scale, const Tree& sums) {
               TreeSpmdFunction body = [=](const Tree& in) {
                 auto [new_params, next_state, new_opt, next_scale, metrics] =
                     apply_sums(optimizer, options, in[0], in[1], in[2], in[3], from_tree(in[4]));
                 KILN_CHECK(new_opt.structure() == in[2].structure(),
                            "the optimizer changed its state's structure");
                 return Tree::list({new_params, next_state, new_opt, next_scale, metrics});
               };
               Tree out = shard_map(body, mesh, PartitionSpec(), PartitionSpec())(
                   Tree::list({params, model_state, opt_state, loss_scale, sums}));
               return StepResult(out[0], out[1], out[2], out[3], out[4]);
             }),
             JitOptions()
                 .named("train_step_apply")
                 .donating({0, 1, 2, 3})
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
  Tree sums = sums_(state.params, state.model_state, state.loss_scale, local.images, local.labels,
                    local.keys, local.mask);
  Tree total = sum_over_processes(sums, "train step sums");
  // Replicated on this process's devices, as the apply half's other arguments are.
  total = placed_on(total, mesh_);
  return apply_(state.params, state.model_state, state.opt_state, state.loss_scale, total);
}

Compiled ProcessParallelStep::compiled(const TrainState& state, const Array& images,
                                       const Array& labels, const Array& key,
                                       const Array& mask) const {
  LocalRows local = local_rows(images, labels, key, mask);
  return sums_.compile(state.params, state.model_state, state.loss_scale, local.images,
                       local.labels, local.keys, local.mask);
}

JitStats ProcessParallelStep::stats() const {
  return combined(sums_.stats(), apply_.stats());
}

}  // namespace kiln::train
