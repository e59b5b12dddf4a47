// Classification metrics (include/kiln/nn/losses.h): accuracy, exact correct counts and
// the confusion matrix, as ordinary traced ops so that evaluation steps jit. Counts are
// integers, so they add up exactly across batches.
#include <fmt/format.h>

#include "kiln/device.h"
#include "kiln/nn/losses.h"
#include "kiln/ops.h"
#include "nn/loss_checks.h"

namespace kiln::nn {
namespace {

Array correct_predictions(std::string_view op, const Array& logits, const Array& labels,
                          CallSite site) {
  detail::check_logits_and_labels(op, logits, labels, site);
  DType index =
      labels.dtype() == DType::i64 || labels.dtype() == DType::u32 ? DType::i64 : DType::i32;
  return equal(argmax(logits, -1, index, site), astype(labels, index, site), site);
}

}  // namespace

Array accuracy(const Array& logits, const Array& labels, CallSite site) {
  return mean(astype(correct_predictions("accuracy", logits, labels, site), DType::f32, site), {},
              false, site);
}

Array correct_count(const Array& logits, const Array& labels, CallSite site) {
  return sum(astype(correct_predictions("correct_count", logits, labels, site), DType::i32, site),
             {}, false, site);
}

Array confusion_matrix(const Array& predictions, const Array& labels, int64_t num_classes,
                       CallSite site) {
  constexpr std::string_view kOp = "confusion_matrix";
  if (!predictions.defined() || !labels.defined()) {
    fail(site, fmt::format("nn::{}: predictions and labels must be defined Arrays", kOp));
  }
  if (num_classes <= 0 || num_classes > 46340) {  // 46340^2 < 2^31: flat cells fit in i32
    fail(site, fmt::format("nn::{}: num_classes must be in [1, 46340], got {}", kOp, num_classes));
  }
  Array predicted = predictions;
  if (is_floating(predictions.dtype())) {
    // Logits or probabilities [batch..., classes]: the prediction is the argmax.
    detail::check_logits_and_labels(kOp, predictions, labels, site);
    predicted = argmax(predictions, -1, DType::i32, site);
  } else if (!is_integer(predictions.dtype()) || !is_integer(labels.dtype()) ||
             predictions.shape() != labels.shape()) {
    fail(site,
         fmt::format("nn::{}: predictions {} and labels {} must be integer classes of the same "
                     "shape (or predictions floating-point scores with one more axis)",
                     kOp, predictions.aval().to_string(), labels.aval().to_string()));
  }
  // Flattened to one cell number per example; examples whose label or prediction is out
  // of range add nothing.
  Array truth = reshape(astype(labels, DType::i64, site), {-1}, site);
  Array guess = reshape(astype(predicted, DType::i64, site), {-1}, site);
  auto integer = [&](int64_t value, const Array& like) {
    return kiln::detail::weak_scalar_like(static_cast<double>(value), false, like, site);
  };
  auto in_range = [&](const Array& c) {
    return bitwise_and(greater_equal(c, integer(0, c), site),
                       less(c, integer(num_classes, c), site), site);
  };
  Array valid = bitwise_and(in_range(truth), in_range(guess), site);
  Array cell =
      astype(add(mul(truth, integer(num_classes, truth), site), guess, site), DType::i32, site);
  cell = where(valid, cell, zeros_like(cell, site), site);
  Array counts = zeros({num_classes * num_classes}, DType::i32, device_of(labels), site);
  return reshape(counts.at(cell, site).add(astype(valid, DType::i32, site)),
                 {num_classes, num_classes}, site);
}

}  // namespace kiln::nn
