// The data-parallel train step: one shard_map over the mesh axis `data`. Params, model
// state and optimizer state are replicated; the batch, its mask and the chunks' dropout
// keys are split by rows. Each device computes the summed loss and its gradient for each
// of its chunks, adds them in the pairwise tree over the chunk index, and psum continues
// that tree across the devices (docs/sharding.md, *Canonical order*): with a fixed number
// of chunks, one device and four add the same numbers in the same order, so they give the
// same bits. Every device then runs the same optimizer update on the same sums.
//
// With StepOptions::shard_params (FSDP, ZeRO-3), every params and optimizer-state leaf
// whose first dimension divides by the mesh size is split along it instead: the step
// all_gathers the params before the forward pass and psum_scatters their gradients, so
// each device keeps and updates only its block. psum_scatter adds in the same canonical
// tree as psum and the optimizers are elementwise, so the bits are those of replicated
// data parallelism.
//
// With StepOptions::model_devices > 1 (tensor parallel), the mesh has a second axis
// `model`: the column- and row-split dense layers' params arrive as blocks over it and
// the layers do their own psum (DenseOptions::parallel). Every device along `model`
// computes the same loss and differentiates 1 / model_devices of it; the gradients of the
// params they all hold are then summed over `model`. The row-split layer adds its partial
// products in another order than one matmul, so the bits depend on model_devices (not on
// the data axis's size).
#include <fmt/format.h>

#include <utility>
#include <vector>

#include "base/check.h"
#include "kiln/error.h"
#include "kiln/ops.h"
#include "kiln/random.h"
#include "kiln/sharding.h"
#include "kiln/transforms.h"
#include "train/data_parallel_parts.h"
#include "train/precision.h"
#include "train/prediction_sums.h"
#include "train/train_step.h"

namespace kiln::train {

Tree tree_add(const Tree& a, const Tree& b) {
  if (a.num_leaves() == 0) return a;
  return tree_map([](const Array& x, const Array& y) { return x + y; }, a, b);
}

Array rows(const Array& x, int64_t begin, int64_t end) {
  Dims start(static_cast<size_t>(x.rank()), 0);
  Dims limit = x.shape().dims();
  start[0] = begin;
  limit[0] = end;
  return slice(x, start, limit);
}

PartitionSpec split_rows(int64_t rank) {
  std::vector<std::vector<std::string>> dims(static_cast<size_t>(rank));
  dims[0] = {kDataAxis};
  return PartitionSpec(std::move(dims));
}

bool splits_over(const Shape& shape, int64_t devices) {
  return shape.rank() >= 1 && shape.dims()[0] > 0 && shape.dims()[0] % devices == 0;
}

ChunkSums add_sums(const ChunkSums& a, const ChunkSums& b) {
  return ChunkSums{a.loss + b.loss, a.correct + b.correct, a.count + b.count,
                   tree_add(a.grads, b.grads), tree_add(a.state, b.state)};
}

ChunkSums device_chunk_sums(const nn::Module& model, const Tree& params, const Tree& state,
                            const Array& x, const Array& y, const Array& keys, const Array& mask,
                            double loss_scale, DType compute, const Array& scale) {
  const bool masked = mask.defined();
  const int64_t local_chunks = keys.dim(0);
  const int64_t chunk_rows = x.dim(0) / local_chunks;
  // Each chunk's sums join the pairwise tree as soon as they are traced, so that its
  // gradient is added (and its buffers freed) before the next chunk runs.
  PairwiseAccumulator<ChunkSums, decltype(&add_sums)> sums(&add_sums);
  for (int64_t c = 0; c < local_chunks; ++c) {
    Array xc = rows(x, c * chunk_rows, (c + 1) * chunk_rows);
    Array yc = rows(y, c * chunk_rows, (c + 1) * chunk_rows);
    Array mc = masked ? rows(mask, c * chunk_rows, (c + 1) * chunk_rows) : Array();
    auto loss_fn = [&](const Tree& q) {
      nn::ApplyOptions apply;
      apply.train = true;
      apply.key = random::key_at(keys, c);
      nn::ApplyResult out = apply_in(compute, model, nn::Variables{q, state}, xc, apply);
      PredictionSums sums = prediction_sums(out.y, yc, mc);
      Tree aux = Tree::dict({{"correct", sums.correct},
                             {"count", sums.count},
                             {"loss", sums.loss_sum},
                             {"state", out.state}});
      Array loss = loss_scale == 1 ? sums.loss_sum : sums.loss_sum * loss_scale;
      return std::make_pair(scale.defined() ? loss * scale : loss, aux);
    };
    auto [value, grads] = value_and_grad(loss_fn, HasAux{})(params);
    const Tree& aux = value.second;
    sums.push(ChunkSums{aux["loss"].leaf(), aux["correct"].leaf(), aux["count"].leaf(), grads,
                        aux["state"]});
  }
  return sums.total();
}

StepResult apply_sums(const optim::GradientTransformation& optimizer, const StepOptions& options,
                      const Tree& params, const Tree& model_state, const Tree& opt_state,
                      const Tree& loss_scale, const ChunkSums& sums,
                      const std::function<Array(const Array&)>& global_flags) {
  const int64_t chunks = options.chunks;
  Array loss = sums.loss / sums.count;
  Tree grads = sums.grads;
  if (grads.num_leaves() > 0) {
    grads = tree_map([&sums](const Array& g) { return g / sums.count; }, grads);
  }
  // Batch norm's statistics: the mean over the chunks of each chunk's update.
  Tree new_state = sums.state;
  if (new_state.num_leaves() > 0) {
    auto n = static_cast<double>(chunks);
    new_state = tree_map([n](const Array& s) { return s / n; }, new_state);
  }
  return finish_step(optimizer, options, params, model_state, opt_state, loss_scale, loss,
                     sums.correct, grads, new_state, global_flags);
}

Tree to_tree(const ChunkSums& sums) {
  return Tree::dict({{"correct", sums.correct},
                     {"count", sums.count},
                     {"grads", sums.grads},
                     {"loss", sums.loss},
                     {"state", sums.state}});
}

ChunkSums from_tree(const Tree& tree) {
  return ChunkSums{tree["loss"].leaf(), tree["correct"].leaf(), tree["count"].leaf(), tree["grads"],
                   tree["state"]};
}

namespace {

Tree tree_psum(const Tree& t) {
  if (t.num_leaves() == 0) return t;
  return tree_map([](const Array& x) { return psum(x, kDataAxis); }, t);
}

// The summed gradient of each param on the device: its block where the param is split
// over `data` (FSDP), else the whole sum; with tensor parallelism, summed over `model` too
// where every device along it holds the param.
Tree summed_gradients(const Tree& grads, const std::vector<bool>& param_split,
                      const StateLayout& layout, bool tensor_parallel) {
  std::vector<Array> leaves = grads.leaves();
  for (size_t i = 0; i < leaves.size(); ++i) {
    leaves[i] =
        param_split[i] ? psum_scatter(leaves[i], kDataAxis, 0, true) : psum(leaves[i], kDataAxis);
    // Each device along `model` differentiated 1 / model_devices of the loss: a param they
    // all hold gets the sum of their shares. After the data axis's sum, so that the order
    // over the chunks is the same on any data size.
    if (tensor_parallel && !splits_over_axis(layout.params[i], kModelAxis)) {
      leaves[i] = psum(leaves[i], kModelAxis);
    }
  }
  return unflatten(grads.structure(), leaves);
}

// What one device runs: its chunks' sums, summed over the mesh, then the update. `in` is
// [params, model state, optimizer state, loss-scale state, images, labels, keys(, mask)
// (, the noise's key: DP-SGD)], the result [params, model state, optimizer state, loss-scale
// state, metrics].
Tree device_step(const nn::Module& model, const optim::GradientTransformation& optimizer,
                 const StepOptions& options, const StateLayout& layout, const Tree& in) {
  const bool tensor_parallel = options.model_devices > 1;
  const Tree& params = in[0];
  // FSDP: the leaves split over `data`, gathered whole for the forward pass.
  std::vector<bool> param_split;
  std::vector<Array> whole = params.leaves();
  for (size_t i = 0; i < whole.size(); ++i) {
    param_split.push_back(splits_over_axis(layout.params[i], kDataAxis));
    if (param_split[i]) whole[i] = all_gather(whole[i], kDataAxis, 0, true);
  }
  const bool private_step = options.privacy.enabled();
  ChunkSums local =
      private_step
          ? device_private_sums(model, unflatten(params.structure(), whole), in[1], in[4].leaf(),
                                in[5].leaf(), in[6].leaf(), in[7].leaf(), options.compute,
                                options.privacy.clip_norm)
          : device_chunk_sums(model, unflatten(params.structure(), whole), in[1], in[4].leaf(),
                              in[5].leaf(), in[6].leaf(), options.masked ? in[7].leaf() : Array(),
                              1.0 / static_cast<double>(options.model_devices), options.compute,
                              step_loss_scale(options.loss_scale, in[3]));
  ChunkSums global{
      psum(local.loss, kDataAxis), psum(local.correct, kDataAxis), psum(local.count, kDataAxis),
      summed_gradients(local.grads, param_split, layout, tensor_parallel), tree_psum(local.state)};
  // Blocks of one gradient on several devices: non-finite anywhere is non-finite.
  // (The config refuses FSDP and tensor parallelism together.)
  const char* split_axis = options.shard_params ? kDataAxis
                           : tensor_parallel    ? kModelAxis
                                                : nullptr;
  auto everywhere = [split_axis](const Array& flags) {
    if (split_axis == nullptr || flags.size() == 0) return flags;
    return greater(psum(astype(flags, DType::i32), split_axis), zeros({}, DType::i32));
  };
  auto [new_params, next_state, new_opt, loss_scale, metrics] =
      private_step
          ? apply_private_sums(optimizer, options, params, in[1], in[2], in[3], global,
                               in[8].leaf(), everywhere)
          : apply_sums(optimizer, options, params, in[1], in[2], in[3], global, everywhere);
  KILN_CHECK(new_opt.structure() == in[2].structure(),
             "the optimizer changed its state's structure");
  return Tree::list({new_params, next_state, new_opt, loss_scale, metrics});
}

}  // namespace

StepFunction accumulating_step(nn::Module model, optim::GradientTransformation optimizer,
                               StepOptions options) {
  KILN_CHECK(options.data_devices == 0 && options.accumulate > 1);
  // apply_sums averages batch norm's statistics over the chunks.
  options.chunks = options.accumulate;
  return [model, optimizer, options](const Tree& params, const Tree& model_state,
                                     const Tree& opt_state, const Tree& loss_scale,
                                     const Array& images, const Array& labels, const Array& key,
                                     const Array& mask) {
    ChunkSums sums =
        device_chunk_sums(model, params, model_state, images, labels,
                          random::split(key, options.accumulate), options.masked ? mask : Array(),
                          1.0, options.compute, step_loss_scale(options.loss_scale, loss_scale));
    return apply_sums(optimizer, options, params, model_state, opt_state, loss_scale, sums, {});
  };
}

StepFunction data_parallel_step(nn::Module model, optim::GradientTransformation optimizer,
                                StepOptions options) {
  KILN_CHECK(options.data_devices > 0 && options.chunks % options.data_devices == 0);
  return [model, optimizer, options](const Tree& params, const Tree& model_state,
                                     const Tree& opt_state, const Tree& loss_scale,
                                     const Array& images, const Array& labels, const Array& key,
                                     const Array& mask) {
    StateLayout layout = state_layout(params, opt_state, options);
    SpecTree params_specs = SpecTree::of_leaves(params, layout.params);
    SpecTree opt_specs = SpecTree::of_leaves(opt_state, layout.opt);
    // DP-SGD: the chunks' keys and, whole on every device, the noise's (private_step.cc).
    const bool private_step = options.privacy.enabled();
    PrivateKeys private_keys_of_step =
        private_step ? private_keys(key, options.chunks) : PrivateKeys{};
    std::vector<Tree> args = {
        params,
        model_state,
        opt_state,
        loss_scale,
        images,
        labels,
        private_step ? private_keys_of_step.chunks : random::split(key, options.chunks)};
    std::vector<SpecTree> in_specs = {
        params_specs,    PartitionSpec(),           opt_specs,
        PartitionSpec(), split_rows(images.rank()), split_rows(labels.rank()),
        split_rows(2)};
    if (options.masked) {
      args.push_back(mask);
      in_specs.push_back(split_rows(mask.rank()));
    }
    if (private_step) {
      args.push_back(private_keys_of_step.noise);
      in_specs.push_back(PartitionSpec());
    }
    TreeSpmdFunction body = [=](const Tree& in) {
      return device_step(model, optimizer, options, layout, in);
    };
    Tree out = shard_map(body, step_mesh(options.data_devices, options.model_devices),
                         SpecTree::list(in_specs),
                         SpecTree::list({params_specs, PartitionSpec(), opt_specs, PartitionSpec(),
                                         PartitionSpec()}))(Tree::list(args));
    return StepResult(out[0], out[1], out[2], out[3], out[4]);
  };
}

}  // namespace kiln::train
