// The sums every step's loss and metrics come from (prediction_sums.h).
#include "train/prediction_sums.h"

#include "kiln/nn/losses.h"
#include "kiln/ops.h"

namespace kiln::train {
namespace {

// A row mask f32[n] shaped to multiply per-label values [n, ...]: [n, 1, ...].
Array mask_per_label(const Array& mask, const Array& per_label) {
  if (per_label.rank() <= 1) return mask;
  Dims shape(static_cast<size_t>(per_label.rank()), 1);
  shape[0] = mask.dim(0);
  return reshape(mask, Shape(shape));
}

}  // namespace

int64_t labels_per_row(const Array& labels) {
  return labels.dim(0) > 0 ? labels.size() / labels.dim(0) : 1;
}

PredictionSums prediction_sums(const Array& logits, const Array& labels, const Array& mask) {
  Array per_label = nn::softmax_cross_entropy_per_example(logits, labels);
  Array hit = astype(equal(argmax(logits, -1, DType::i32), labels), DType::i32);
  auto per_row = static_cast<double>(labels_per_row(labels));
  if (!mask.defined()) {
    return PredictionSums{sum(per_label), sum(hit),
                          full({}, static_cast<double>(labels.dim(0)) * per_row)};
  }
  Array row_mask = mask_per_label(mask, per_label);
  return PredictionSums{sum(per_label * row_mask), sum(hit * astype(row_mask, DType::i32)),
                        sum(mask) * per_row};
}

}  // namespace kiln::train
