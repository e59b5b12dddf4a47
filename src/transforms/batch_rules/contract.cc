// Batching rules of the contract family. dot_general takes the batch into its dimension
// numbers (a batch dimension when both operands carry it, a free dimension when one does)
// and leaves the result's batch axis wherever dot_general puts it. conv_general_dilated
// folds the batch into the input's N axis (a batched input), into the kernel's output
// channels (a batched kernel), or into feature groups (both batched), as JAX does, so every
// case is one convolution (an empty batch of both needs none).
#include <algorithm>

#include "kiln/ops.h"
#include "prims/bind.h"
#include "prims/ids/contract.h"
#include "transforms/batch_rules/batch_rules.h"
#include "transforms/batch_rules/batch_util.h"

namespace kiln {
namespace {

// ----- dot_general ------------------------------------------------------------------------

void shift_all(Dims& axes, int64_t dim) {
  for (int64_t& axis : axes) axis = batch_util::batched_axis(axis, dim);
}

// Position of axis `dim` among the free (neither batch nor contracting) axes of its operand.
int64_t free_position(int64_t dim, const Dims& batch, const Dims& contracting) {
  auto below = [&](int64_t axis) { return axis < dim; };
  return dim - std::count_if(batch.begin(), batch.end(), below) -
         std::count_if(contracting.begin(), contracting.end(), below);
}

// Output axes are batch axes, then lhs free, then rhs free (DotGeneralParams), so a batch
// carried by both operands becomes the first batch dimension (result axis 0), and one
// carried by one operand is a free axis of that side, left in place: no transposes.
BatchResult dot_general_rule(const BatchArgs& args) {
  const Array& lhs = args.inputs[0];
  const Array& rhs = args.inputs[1];
  int64_t ld = args.dims[0], rd = args.dims[1];
  DotGeneralParams p = std::get<DotGeneralParams>(args.params);
  shift_all(p.lhs_contracting, ld);
  shift_all(p.lhs_batch, ld);
  shift_all(p.rhs_contracting, rd);
  shift_all(p.rhs_batch, rd);
  int64_t out_dim = 0;
  if (ld != kNotBatched && rd != kNotBatched) {
    p.lhs_batch.insert_at(0, ld);
    p.rhs_batch.insert_at(0, rd);
  } else if (ld != kNotBatched) {
    out_dim = static_cast<int64_t>(p.lhs_batch.size()) +
              free_position(ld, p.lhs_batch, p.lhs_contracting);
  } else {
    int64_t lhs_free =
        lhs.rank() - static_cast<int64_t>(p.lhs_batch.size() + p.lhs_contracting.size());
    out_dim = static_cast<int64_t>(p.lhs_batch.size()) + lhs_free +
              free_position(rd, p.rhs_batch, p.rhs_contracting);
  }
  Array out = bind1(prim::dot_general, {lhs, rhs}, p, args.site);
  return BatchResult{{std::move(out)}, {out_dim}};
}

// ----- conv_general_dilated ---------------------------------------------------------------

Array conv(const Array& x, const Array& w, const ConvParams& p, CallSite site) {
  return bind1(prim::conv_general_dilated, {x, w}, p, site);
}

// A batched input [B, N, H, W, C] is a convolution of B * N images with the same kernel.
// A batch already next to N ([N, B, H, W, C]) merges as it is, without a transpose, and
// stays on axis 1 of the result.
BatchResult conv_batched_input(const BatchArgs& args) {
  int64_t dim = args.dims[0] <= 1 ? args.dims[0] : 0;
  Array x = batch_util::batch_at(args.inputs[0], args.dims[0], dim, args.size, args.site);
  Array y = conv(batch_util::merge_axes(x, 0, args.site), args.inputs[1],
                 std::get<ConvParams>(args.params), args.site);
  return BatchResult{{batch_util::split_axis(y, 0, x.dim(0), x.dim(1), args.site)}, {dim}};
}

// `x` (a kernel [KH, KW, I, ...] or a result [N, OH, OW, ...]) with its first three axes
// kept and its trailing (channel) axes reshaped to `channels`.
Array with_channels(const Array& x, Dims channels, CallSite site) {
  Dims sizes{x.dim(0), x.dim(1), x.dim(2)};
  for (int64_t size : channels) sizes.push_back(size);
  return reshape(x, Shape(sizes), site);
}

// A batched kernel [B, KH, KW, I, O] is one kernel with B times the output channels. The
// channels of group g must stay together (output channel o belongs to group o / (O / G)),
// so the batch goes inside the group: [KH, KW, I, G, B, O/G], and the result's channels
// (G, B, O/G) are regrouped to (B, G, O/G) after the convolution. With one group neither
// step needs a transpose beyond putting the batch before O.
BatchResult conv_batched_kernel(const BatchArgs& args) {
  const auto& p = std::get<ConvParams>(args.params);
  CallSite site = args.site;
  int64_t groups = p.feature_group_count, b = args.size;
  Array w =
      batch_util::batch_at(args.inputs[1], args.dims[1], 3, args.size, site);  // [KH, KW, I, B, O]
  int64_t o = w.dim(4), per_group = o / groups;
  if (groups > 1) {
    // [KH, KW, I, B, G, O/G] -> [KH, KW, I, G, B, O/G]
    w = transpose(with_channels(w, {b, groups, per_group}, site), {0, 1, 2, 4, 3, 5}, site);
  }
  Array y = conv(args.inputs[0], with_channels(w, {b * o}, site), p, site);
  if (groups > 1) {
    // [N, OH, OW, G, B, O/G] -> [N, OH, OW, B, G, O/G]
    y = transpose(with_channels(y, {groups, b, per_group}, site), {0, 1, 2, 4, 3, 5}, site);
  }
  return BatchResult{{with_channels(y, {b, o}, site)}, {3}};
}

// Both batched: example b's channels become feature groups b * G .. b * G + G - 1 of one
// convolution over [N, H, W, B * C] with the kernels side by side as [KH, KW, I, B * O].
// Input channel b * C + c and output channel b * O + o then fall in group b * G + (their
// group within the example), so each example meets only its own kernel.
BatchResult conv_batched_both(const BatchArgs& args) {
  ConvParams p = std::get<ConvParams>(args.params);
  CallSite site = args.site;
  int64_t b = args.size;
  Array x =
      batch_util::batch_at(args.inputs[0], args.dims[0], 3, args.size, site);  // [N, H, W, B, C]
  Array w =
      batch_util::batch_at(args.inputs[1], args.dims[1], 3, args.size, site);  // [KH, KW, I, B, O]
  int64_t c = x.dim(4), o = w.dim(4);
  p.feature_group_count *= b;
  Array y = conv(with_channels(x, {b * c}, site), with_channels(w, {b * o}, site), p, site);
  return BatchResult{{with_channels(y, {b, o}, site)}, {3}};
}

BatchResult conv_rule(const BatchArgs& args) {
  bool lhs = args.dims[0] != kNotBatched, rhs = args.dims[1] != kNotBatched;
  if (lhs && rhs) {
    // No example means zero feature groups, which a convolution cannot have; the empty
    // result needs no kernel at all (the loop runs zero times and only builds the zeros).
    if (args.size == 0) return batch_util::loop_over_examples(prim::conv_general_dilated, args);
    return conv_batched_both(args);
  }
  return lhs ? conv_batched_input(args) : conv_batched_kernel(args);
}

}  // namespace

void register_batch_contract(PrimTable& table) {
  table[prim::dot_general].batch = dot_general_rule;
  table[prim::conv_general_dilated].batch = conv_rule;
}

}  // namespace kiln
