// DP-SGD's train step (Abadi et al. 2016; docs/privacy.md): each example's gradient by vmap
// of the loss gradient of one example, clipped to L2 norm C over all parameters together,
// summed, plus Gaussian noise of standard deviation sigma x C, divided by the expected
// batch size; then the ordinary update (finish_step).
//
// The batch arrives Poisson-sampled and padded to a fixed number of rows (the mask says
// which are real), so the step compiles once. Per-example gradients are computed
// `examples_per_chunk` rows at a time: a chunk's gradients are clipped and summed before the
// next chunk's exist, and the chunks' sums are added in the pairwise tree of the data-parallel
// steps. A padded row's factor is exactly 0, so it adds exact zeros.
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
namespace {

// What one chunk adds: the clipped gradients' sum, and the real rows' loss and correct counts.
struct ClippedSums {
  Tree grads;
  Array loss;     // f32[]: the real examples' losses, summed
  Array correct;  // i32[]
};

ClippedSums add_clipped(const ClippedSums& a, const ClippedSums& b) {
  return ClippedSums{tree_add(a.grads, b.grads), a.loss + b.loss, a.correct + b.correct};
}

}  // namespace

StepFunction private_step(nn::Module model, optim::GradientTransformation optimizer,
                          StepOptions options) {
  const StepOptions::Privacy& privacy = options.privacy;
  KILN_CHECK(privacy.enabled() && options.masked && options.data_devices == 0 &&
             options.accumulate == 1 && options.loss_scale.mode == "none");
  return [model, optimizer, options](const Tree& params, const Tree& model_state,
                                     const Tree& opt_state, const Tree& loss_scale,
                                     const Array& images, const Array& labels, const Array& key,
                                     const Array& mask) {
    const StepOptions::Privacy& privacy = options.privacy;
    const int64_t batch_rows = images.dim(0);
    const int64_t chunk_rows = privacy.examples_per_chunk;
    if (batch_rows % chunk_rows != 0) {
      fail(kUnknownSite,
           fmt::format("private step: a batch of {} rows does not split into chunks of "
                       "privacy.examples_per_chunk = {}",
                       batch_rows, chunk_rows));
    }
    Array keys = random::split(key, 2);
    Array example_keys = random::split(random::key_at(keys, 0), batch_rows);
    // One example's loss (the mean over its labels: one for a classifier) and its gradient.
    auto example = [&](const Tree& p, const Array& x, const Array& y, const Array& k) {
      auto loss_fn = [&](const Tree& q) {
        nn::ApplyOptions apply;
        apply.train = true;
        apply.key = k;
        nn::ApplyResult out = apply_in(options.compute, model, nn::Variables{q, model_state},
                                       expand_dims(x, 0), apply);
        PredictionSums sums = prediction_sums(out.y, expand_dims(y, 0), Array());
        Array loss = sums.loss_sum / sums.count;
        return std::make_pair(loss, Tree::dict({{"correct", sums.correct}, {"loss", loss}}));
      };
      auto [value, grads] = value_and_grad(loss_fn, HasAux{})(p);
      return Tree::dict({{"aux", value.second}, {"grads", grads}});
    };
    const double clip = privacy.clip_norm;
    PairwiseAccumulator<ClippedSums, decltype(&add_clipped)> sums(&add_clipped);
    for (int64_t begin = 0; begin < batch_rows; begin += chunk_rows) {
      const int64_t end = begin + chunk_rows;
      Tree per_example = vmap(example, {kNotMapped, 0, 0, 0})(params, rows(images, begin, end),
                                                              rows(labels, begin, end),
                                                              rows(example_keys, begin, end));
      Array m = rows(mask, begin, end);
      Tree grads = per_example["grads"];
      // Each example's L2 norm over every parameter, and the factor that clips it to C:
      // 1 / max(1, norm / C), times the mask (0 for a padded row). The weighted sum is a
      // contraction over each gradient viewed as [rows, size]: one pass over the per-example
      // gradients, with no scaled copy of them.
      std::vector<Array> leaves = grads.leaves();
      std::vector<Array> flat;
      Array squared = zeros({chunk_rows});
      for (const Array& g : leaves) {
        flat.push_back(reshape(g, {chunk_rows, chunk_rows > 0 ? g.size() / chunk_rows : 0}));
        squared = squared + sum(flat.back() * flat.back(), {1});
      }
      Array factor = m / maximum(sqrt(squared) / full({}, clip), full({}, 1.0));
      std::vector<Array> clipped;
      for (size_t i = 0; i < leaves.size(); ++i) {
        Dims shape = leaves[i].shape().dims();
        shape.erase_at(0);
        clipped.push_back(reshape(dot_general(factor, flat[i], {0}, {0}), Shape(shape)));
      }
      Array correct =
          sum(where(m > 0, per_example["aux"]["correct"].leaf(), zeros({}, DType::i32)));
      sums.push(ClippedSums{leaves.empty() ? grads : unflatten(grads.structure(), clipped),
                            sum(per_example["aux"]["loss"].leaf() * m), correct});
    }
    ClippedSums total = sums.total();
    // The noise, once per step, drawn for each parameter from its own key; the sum over the
    // expected batch size (not the drawn one, which would reveal how many were drawn).
    std::vector<Array> noisy = total.grads.leaves();
    const double noise_std = privacy.noise_multiplier * clip;
    const double expected = privacy.expected_batch;
    for (size_t i = 0; i < noisy.size(); ++i) {
      Array noise =
          random::normal(random::fold_in(random::key_at(keys, 1), static_cast<uint32_t>(i)),
                         noisy[i].shape(), noisy[i].dtype());
      noisy[i] = (noisy[i] + noise * full({}, noise_std, noisy[i].dtype())) /
                 full({}, expected, noisy[i].dtype());
    }
    Tree grads = noisy.empty() ? total.grads : unflatten(total.grads.structure(), noisy);
    // The drawn examples' mean loss, for the metrics only (a batch may draw none).
    Array loss = total.loss / maximum(sum(mask), full({}, 1.0));
    return finish_step(optimizer, options, params, model_state, opt_state, loss_scale, loss,
                       total.correct, grads, model_state);
  };
}

}  // namespace kiln::train
