// Losses and metrics. Losses return the mean over the batch (a scalar) unless the name
// says per_example; labels are integer class indices, not one-hot.
//
//   Array loss = nn::softmax_cross_entropy(logits, labels, {.label_smoothing = 0.1});
#pragma once

#include <optional>

#include "kiln/array.h"
#include "kiln/error.h"

namespace kiln::nn {

struct CrossEntropyOptions {
  // Target = (1 - s) * one_hot + s / num_classes.
  double label_smoothing = 0;
  // f32[num_classes]: each example's loss is multiplied by its label's weight, and the mean
  // divides by the sum of the weights used (as torch.nn.CrossEntropyLoss(weight=...); with
  // label smoothing the smoothing term weighs each class by its own weight, as torch does).
  Array class_weights;
};

// logits f[batch..., classes], labels integer [batch...] in [0, classes). Computed from
// log_softmax, so finite for any finite logits. Labels out of range give NaN for that
// example rather than reading out of bounds (the check needs the values: see
// check_labels_in_range).
Array softmax_cross_entropy_per_example(const Array& logits, const Array& labels,
                                        const CrossEntropyOptions& options = {},
                                        CallSite site = {});
Array softmax_cross_entropy(const Array& logits, const Array& labels,
                            const CrossEntropyOptions& options = {}, CallSite site = {});
// Reads the labels (a host synchronization) and fails naming the first one outside
// [0, num_classes): for data loaders, before labels reach a loss.
void check_labels_in_range(const Array& labels, int64_t num_classes, CallSite site = {});

// targets in [0, 1], same shape as logits. pos_weight (broadcast against the last axis)
// multiplies the positive term, as torch.nn.BCEWithLogitsLoss(pos_weight=...).
Array binary_cross_entropy_with_logits(const Array& logits, const Array& targets,
                                       const Array& pos_weight = Array(), CallSite site = {});

Array mse(const Array& predictions, const Array& targets, CallSite site = {});
// 0.5 * e^2 where |e| <= delta, delta * (|e| - 0.5 * delta) beyond (torch's HuberLoss).
Array huber(const Array& predictions, const Array& targets, double delta = 1.0, CallSite site = {});
// Multi-class focal loss from logits and integer labels: -alpha * (1 - p_t)^gamma * log p_t.
Array focal_loss(const Array& logits, const Array& labels, double gamma = 2.0, double alpha = 1.0,
                 CallSite site = {});
// mean(max(0, -y * (x1 - x2) + margin)), y in {1, -1} (torch's MarginRankingLoss).
Array margin_ranking(const Array& x1, const Array& x2, const Array& y, double margin = 0.0,
                     CallSite site = {});

// ----- metrics ---------------------------------------------------------------------------
// Fraction of examples whose argmax over the last axis equals the label (f32 scalar).
Array accuracy(const Array& logits, const Array& labels, CallSite site = {});
// Number of correct predictions (i32 scalar): sums exactly across batches.
Array correct_count(const Array& logits, const Array& labels, CallSite site = {});
// i32[num_classes, num_classes]: row = true label, column = predicted class.
Array confusion_matrix(const Array& predictions, const Array& labels, int64_t num_classes,
                       CallSite site = {});

}  // namespace kiln::nn
