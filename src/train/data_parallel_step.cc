// The data-parallel train step: one shard_map over the mesh axis `data`. Params, model
// state and optimizer state are replicated; the batch, its mask and the chunks' dropout
// keys are split by rows. Each device computes the summed loss and its gradient for each
// of its chunks, adds them in the pairwise tree over the chunk index, and psum continues
// that tree across the devices (docs/sharding.md, *Canonical order*): with a fixed number
// of chunks, one device and four add the same numbers in the same order, so they give the
// same bits. Every device then runs the same optimizer update on the same sums.
#include <fmt/format.h>

#include <utility>
#include <vector>

#include "kiln/error.h"
#include "kiln/nn/losses.h"
#include "kiln/ops.h"
#include "kiln/random.h"
#include "kiln/sharding.h"
#include "kiln/transforms.h"
#include "train/train_step.h"

namespace kiln::train {
namespace {

constexpr const char* kAxis = "data";

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

Tree tree_add(const Tree& a, const Tree& b) {
  if (a.num_leaves() == 0) return a;
  return tree_map([](const Array& x, const Array& y) { return x + y; }, a, b);
}

Tree tree_psum(const Tree& t) {
  if (t.num_leaves() == 0) return t;
  return tree_map([](const Array& x) { return psum(x, kAxis); }, t);
}

// Rows [begin, end) of x, whatever its rank.
Array rows(const Array& x, int64_t begin, int64_t end) {
  Dims start(static_cast<size_t>(x.rank()), 0);
  Dims limit = x.shape().dims();
  start[0] = begin;
  limit[0] = end;
  return slice(x, start, limit);
}

PartitionSpec split_rows(int64_t rank) {
  std::vector<std::vector<std::string>> dims(static_cast<size_t>(rank));
  dims[0] = {kAxis};
  return PartitionSpec(std::move(dims));
}

// What one chunk contributes: sums, divided only once every chunk is in.
struct ChunkSums {
  Array loss;     // f32[]: summed per-example loss (masked rows add exact zeros)
  Array correct;  // i32[]
  Array count;    // f32[]: the rows that count (the mask's sum; the rows without a mask)
  Tree grads;     // of `loss`
  Tree state;     // the model state after this chunk (batch norm's running statistics)
};

}  // namespace

StepFunction data_parallel_step(nn::Module model, optim::GradientTransformation optimizer,
                                StepOptions options) {
  KILN_CHECK(options.data_devices > 0 && options.chunks % options.data_devices == 0);
  return [model, optimizer, options](const Tree& params, const Tree& model_state,
                                     const Tree& opt_state, const Array& images,
                                     const Array& labels, const Array& key, const Array& mask) {
    const int64_t devices = options.data_devices;
    const int64_t chunks = options.chunks;
    const bool masked = options.masked;
    TreeDef params_def = params.structure(), state_def = model_state.structure(),
            opt_def = opt_state.structure();
    const auto num_params = static_cast<size_t>(params_def.num_leaves());
    const auto num_state = static_cast<size_t>(state_def.num_leaves());
    const auto num_opt = static_cast<size_t>(opt_def.num_leaves());

    SpmdFunction body = [=](const std::vector<Array>& in) {
      auto tree_at = [&in](const TreeDef& def, size_t begin, size_t count) {
        return unflatten(def, std::span(in).subspan(begin, count));
      };
      Tree p = tree_at(params_def, 0, num_params);
      Tree state = tree_at(state_def, num_params, num_state);
      Tree opt = tree_at(opt_def, num_params + num_state, num_opt);
      size_t at = num_params + num_state + num_opt;
      const Array& x = in[at];
      const Array& y = in[at + 1];
      const Array& keys = in[at + 2];
      const int64_t local_chunks = keys.dim(0);
      const int64_t chunk_rows = x.dim(0) / local_chunks;

      std::vector<ChunkSums> parts;
      for (int64_t c = 0; c < local_chunks; ++c) {
        Array xc = rows(x, c * chunk_rows, (c + 1) * chunk_rows);
        Array yc = rows(y, c * chunk_rows, (c + 1) * chunk_rows);
        Array mc = masked ? rows(in[at + 3], c * chunk_rows, (c + 1) * chunk_rows) : Array();
        auto loss_fn = [&](const Tree& q) {
          nn::ApplyOptions apply;
          apply.train = true;
          apply.key = random::key_at(keys, c);
          nn::ApplyResult out = model.apply(nn::Variables{q, state}, xc, apply);
          Array per_example = nn::softmax_cross_entropy_per_example(out.y, yc);
          Array hit = astype(equal(argmax(out.y, -1, DType::i32), yc), DType::i32);
          Array loss = masked ? sum(per_example * mc) : sum(per_example);
          Array correct = masked ? sum(hit * astype(mc, DType::i32)) : sum(hit);
          return std::make_pair(loss, Tree::dict({{"correct", correct}, {"state", out.state}}));
        };
        auto [value, grads] = value_and_grad(loss_fn, HasAux{})(p);
        const auto& [loss, aux] = value;
        Array count = masked ? sum(mc) : full({}, static_cast<double>(chunk_rows));
        parts.push_back(ChunkSums{loss, aux["correct"].leaf(), count, grads, aux["state"]});
      }
      auto add = [](const ChunkSums& a, const ChunkSums& b) {
        return ChunkSums{a.loss + b.loss, a.correct + b.correct, a.count + b.count,
                         tree_add(a.grads, b.grads), tree_add(a.state, b.state)};
      };
      ChunkSums local = pairwise_sum(parts, add);
      Array count = psum(local.count, kAxis);
      Array loss = psum(local.loss, kAxis) / count;
      Array correct = psum(local.correct, kAxis);
      Tree grads = tree_psum(local.grads);
      if (grads.num_leaves() > 0) {
        grads = tree_map([&count](const Array& g) { return g / count; }, grads);
      }
      // Batch norm's statistics: the mean over the chunks of each chunk's update.
      Tree new_state = tree_psum(local.state);
      if (new_state.num_leaves() > 0) {
        auto n = static_cast<double>(chunks);
        new_state = tree_map([n](const Array& s) { return s / n; }, new_state);
      }
      auto [new_params, next_state, new_opt, metrics] = finish_step(
          optimizer, options.skip_nonfinite, p, state, opt, loss, correct, grads, new_state);
      KILN_CHECK(new_opt.structure() == opt_def, "the optimizer changed its state's structure");
      std::vector<Array> out = new_params.leaves();
      for (const Tree* t : {&next_state, &new_opt}) {
        std::vector<Array> leaves = t->leaves();
        out.insert(out.end(), leaves.begin(), leaves.end());
      }
      for (const char* name : {"correct", "loss", "lr", "nonfinite"}) {
        out.push_back(metrics[name].leaf());
      }
      return out;
    };

    std::vector<Array> args = params.leaves();
    for (const Tree* t : {&model_state, &opt_state}) {
      std::vector<Array> leaves = t->leaves();
      args.insert(args.end(), leaves.begin(), leaves.end());
    }
    std::vector<PartitionSpec> in_specs(args.size(), PartitionSpec());
    args.push_back(images);
    in_specs.push_back(split_rows(images.rank()));
    args.push_back(labels);
    in_specs.push_back(split_rows(labels.rank()));
    args.push_back(random::split(key, chunks));
    in_specs.push_back(split_rows(2));
    if (masked) {
      args.push_back(mask);
      in_specs.push_back(split_rows(mask.rank()));
    }
    std::vector<PartitionSpec> out_specs(num_params + num_state + num_opt + 4, PartitionSpec());
    std::vector<Array> out = shard_map(body, Mesh({{kAxis, devices}}), in_specs, out_specs)(args);
    auto tree_at = [&out](const TreeDef& def, size_t begin, size_t count) {
      return unflatten(def, std::span(out).subspan(begin, count));
    };
    size_t at = num_params + num_state + num_opt;
    Tree metrics = Tree::dict({{"correct", out[at]},
                               {"loss", out[at + 1]},
                               {"lr", out[at + 2]},
                               {"nonfinite", out[at + 3]}});
    return StepResult(tree_at(params_def, 0, num_params), tree_at(state_def, num_params, num_state),
                      tree_at(opt_def, num_params + num_state, num_opt), metrics);
  };
}

}  // namespace kiln::train
