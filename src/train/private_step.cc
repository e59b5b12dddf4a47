// DP-SGD's train step (Abadi et al. 2016; docs/privacy.md): each example's gradient by vmap
// of the loss gradient of one example, clipped to L2 norm C over all parameters together,
// summed, plus Gaussian noise of standard deviation sigma x C, divided by the expected
// batch size; then the ordinary update (finish_step).
//
// The batch arrives Poisson-sampled and padded to a fixed number of rows (the mask says
// which are real), so the step compiles once. It is cut into chunks of `examples_per_chunk`
// rows: a chunk's per-example gradients are clipped and summed before the next chunk's
// exist, and the chunks' sums are added in the pairwise tree of the data-parallel steps, so
// that a mesh (each device its share of the chunks, psum continuing the tree) adds the same
// numbers in the same order as one device. A padded row's factor is exactly 0: it adds
// exact zeros. The noise is drawn after the sum from a key every device holds, so each
// device adds the same noise: once, not once per device.
#include <fmt/format.h>

#include <utility>
#include <vector>

#include "base/check.h"
#include "kiln/error.h"
#include "kiln/ops.h"
#include "kiln/random.h"
#include "kiln/transforms.h"
#include "kiln/vmap.h"
#include "train/data_parallel_parts.h"
#include "train/precision.h"
#include "train/prediction_sums.h"
#include "train/train_step.h"

namespace kiln::train {

PrivateKeys private_keys(const Array& key, int64_t chunks) {
  Array keys = random::split(key, 2);
  return PrivateKeys{random::split(random::key_at(keys, 0), chunks), random::key_at(keys, 1)};
}

ChunkSums device_private_sums(const nn::Module& model, const Tree& params, const Tree& state,
                              const Array& x, const Array& y, const Array& keys, const Array& mask,
                              DType compute, double clip_norm) {
  const int64_t local_chunks = keys.dim(0);
  const int64_t chunk_rows = x.dim(0) / local_chunks;
  // One example's loss (the mean over its labels: one for a classifier) and its gradient.
  auto example = [&](const Tree& p, const Array& xi, const Array& yi, const Array& k) {
    auto loss_fn = [&](const Tree& q) {
      nn::ApplyOptions apply;
      apply.train = true;
      apply.key = k;
      nn::ApplyResult out =
          apply_in(compute, model, nn::Variables{q, state}, expand_dims(xi, 0), apply);
      PredictionSums sums = prediction_sums(out.y, expand_dims(yi, 0), Array());
      Array loss = sums.loss_sum / sums.count;
      return std::make_pair(loss, Tree::dict({{"correct", sums.correct}, {"loss", loss}}));
    };
    auto [value, grads] = value_and_grad(loss_fn, HasAux{})(p);
    return Tree::dict({{"aux", value.second}, {"grads", grads}});
  };
  PairwiseAccumulator<ChunkSums, decltype(&add_sums)> sums(&add_sums);
  for (int64_t c = 0; c < local_chunks; ++c) {
    const int64_t begin = c * chunk_rows, end = begin + chunk_rows;
    Tree per_example =
        vmap(example, {kNotMapped, 0, 0, 0})(params, rows(x, begin, end), rows(y, begin, end),
                                             random::split(random::key_at(keys, c), chunk_rows));
    Array m = rows(mask, begin, end);
    // Each example's L2 norm over every parameter, and the factor that clips it to C:
    // 1 / max(1, norm / C), times the mask (0 for a padded row). The weighted sum is a
    // contraction over each gradient viewed as [rows, size]: one pass over the per-example
    // gradients, with no scaled copy of them.
    std::vector<Array> leaves = per_example["grads"].leaves();
    std::vector<Array> flat;
    Array squared = zeros({chunk_rows});
    for (const Array& g : leaves) {
      flat.push_back(reshape(g, {chunk_rows, chunk_rows > 0 ? g.size() / chunk_rows : 0}));
      squared = squared + sum(flat.back() * flat.back(), {1});
    }
    Array factor = m / maximum(sqrt(squared) / full({}, clip_norm), full({}, 1.0));
    std::vector<Array> clipped;
    for (size_t i = 0; i < leaves.size(); ++i) {
      Dims shape = leaves[i].shape().dims();
      shape.erase_at(0);
      clipped.push_back(reshape(dot_general(factor, flat[i], {0}, {0}), Shape(shape)));
    }
    const Tree& aux = per_example["aux"];
    sums.push(ChunkSums{sum(aux["loss"].leaf() * m),
                        sum(where(m > 0, aux["correct"].leaf(), zeros({}, DType::i32))), sum(m),
                        leaves.empty() ? per_example["grads"]
                                       : unflatten(per_example["grads"].structure(), clipped),
                        Tree()});
  }
  return sums.total();
}

StepResult apply_private_sums(const optim::GradientTransformation& optimizer,
                              const StepOptions& options, const Tree& params,
                              const Tree& model_state, const Tree& opt_state,
                              const Tree& loss_scale, const ChunkSums& sums, const Array& noise_key,
                              const std::function<Array(const Array&)>& global_flags) {
  const StepOptions::Privacy& privacy = options.privacy;
  // The noise, drawn for each parameter from its own key; the sum over the expected batch
  // size (not the drawn one, which would reveal how many were drawn).
  std::vector<Array> noisy =
      sums.grads.num_leaves() > 0 ? sums.grads.leaves() : std::vector<Array>{};
  const double noise_std = privacy.noise_multiplier * privacy.clip_norm;
  for (size_t i = 0; i < noisy.size(); ++i) {
    DType dtype = noisy[i].dtype();
    Array noise = random::normal(random::fold_in(noise_key, static_cast<uint32_t>(i)),
                                 noisy[i].shape(), dtype);
    noisy[i] =
        (noisy[i] + noise * full({}, noise_std, dtype)) / full({}, privacy.expected_batch, dtype);
  }
  Tree grads = noisy.empty() ? sums.grads : unflatten(sums.grads.structure(), noisy);
  // The drawn examples' mean loss, for the metrics only (a batch may draw none).
  Array loss = sums.loss / maximum(sums.count, full({}, 1.0));
  return finish_step(optimizer, options, params, model_state, opt_state, loss_scale, loss,
                     sums.correct, grads, model_state, global_flags);
}

StepFunction private_step(nn::Module model, optim::GradientTransformation optimizer,
                          StepOptions options) {
  KILN_CHECK(options.privacy.enabled() && options.masked && options.data_devices == 0 &&
             options.accumulate == 1 && options.loss_scale.mode == "none");
  return [model, optimizer, options](const Tree& params, const Tree& model_state,
                                     const Tree& opt_state, const Tree& loss_scale,
                                     const Array& images, const Array& labels, const Array& key,
                                     const Array& mask) {
    const int64_t batch_rows = images.dim(0);
    const int64_t chunk_rows = options.privacy.examples_per_chunk;
    if (batch_rows % chunk_rows != 0) {
      fail(kUnknownSite,
           fmt::format("private step: a batch of {} rows does not split into chunks of "
                       "privacy.examples_per_chunk = {}",
                       batch_rows, chunk_rows));
    }
    PrivateKeys keys = private_keys(key, batch_rows / chunk_rows);
    ChunkSums sums = device_private_sums(model, params, model_state, images, labels, keys.chunks,
                                         mask, options.compute, options.privacy.clip_norm);
    return apply_private_sums(optimizer, options, params, model_state, opt_state, loss_scale, sums,
                              keys.noise, {});
  };
}

}  // namespace kiln::train
