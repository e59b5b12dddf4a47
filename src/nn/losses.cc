// Losses (include/kiln/nn/losses.h), composed of kiln ops so that they trace,
// differentiate, batch and jit. Every loss works from log-probabilities or in a form with
// no exp of a positive number, so any finite logits give a finite loss and gradient.
#include "kiln/nn/losses.h"

#include <cmath>
#include <limits>
#include <vector>

#include <fmt/format.h>

#include "kiln/nn/activations.h"
#include "kiln/ops.h"
#include "nn/loss_checks.h"

namespace kiln::nn {
namespace {

using detail::check_float_arg;
using detail::check_logits_and_labels;
using detail::check_same_shape;

Array weak(double value, const Array& like, CallSite site) {
  return kiln::detail::weak_scalar_like(value, true, like, site);
}

// Labels clamped into [0, classes) so that gathers stay in bounds, and where they were
// already there: out-of-range labels make their example NaN instead.
struct Labels {
  Array clamped;
  Array valid;
};

Labels clamp_labels(const Array& raw_labels, int64_t num_classes, CallSite site) {
  // A wide index dtype, so that classes - 1 is representable (u8 labels, 300 classes).
  bool wide = raw_labels.dtype() == DType::i64 || raw_labels.dtype() == DType::u32;
  Array labels = astype(raw_labels, wide ? DType::i64 : DType::i32, site);
  Array low = kiln::detail::weak_scalar_like(0, false, labels, site);
  Array high =
      kiln::detail::weak_scalar_like(static_cast<double>(num_classes - 1), false, labels, site);
  Array valid = bitwise_and(greater_equal(labels, low, site), less_equal(labels, high, site), site);
  return {.clamped = minimum(maximum(labels, low, site), high, site), .valid = valid};
}

Array nan_where_invalid(const Array& loss, const Array& valid, CallSite site) {
  return where(valid, loss, weak(std::numeric_limits<double>::quiet_NaN(), loss, site), site);
}

// The per-example losses and, with class weights, each example's label weight (the
// denominator of the weighted mean).
struct CrossEntropy {
  Array loss;
  Array label_weight;
};

CrossEntropy cross_entropy(std::string_view op, const Array& logits, const Array& labels,
                           const CrossEntropyOptions& options, CallSite site) {
  check_logits_and_labels(op, logits, labels, site);
  double s = options.label_smoothing;
  if (!(s >= 0 && s <= 1)) {
    fail(site, fmt::format("nn::{}: label_smoothing must be in [0, 1], got {}", op, s));
  }
  int64_t num_classes = logits.dim(-1);
  Array weights;
  if (options.class_weights.defined()) {
    check_float_arg(op, "class_weights", options.class_weights, site);
    if (options.class_weights.shape() != Shape{num_classes}) {
      fail(site, fmt::format("nn::{}: class_weights {} must have one weight per class, [{}], for "
                             "logits {}",
                             op, options.class_weights.aval().to_string(), num_classes,
                             logits.aval().to_string()));
    }
    weights = astype(options.class_weights, logits.dtype(), site);
  }
  Labels l = clamp_labels(labels, num_classes, site);
  Array logp = log_softmax(logits, -1, site);
  Array loss = neg(take_along_axis(logp, l.clamped, -1, site), site);
  Array label_weight;
  if (weights.defined()) {
    label_weight = take(weights, l.clamped, 0, std::nullopt, site);
    loss = mul(loss, label_weight, site);
  }
  if (s > 0) {
    // -sum_c (s / C) log p_c, each class weighted by its own weight (as PyTorch).
    Array per_class = weights.defined() ? mul(logp, weights, site) : logp;
    Array smooth = mul(sum(per_class, {-1}, false, site),
                       weak(-s / static_cast<double>(num_classes), logp, site), site);
    loss = add(mul(loss, weak(1 - s, loss, site), site), smooth, site);
  }
  return {.loss = nan_where_invalid(loss, l.valid, site), .label_weight = label_weight};
}

}  // namespace

Array softmax_cross_entropy_per_example(const Array& logits, const Array& labels,
                                        const CrossEntropyOptions& options, CallSite site) {
  return cross_entropy("softmax_cross_entropy_per_example", logits, labels, options, site).loss;
}

Array softmax_cross_entropy(const Array& logits, const Array& labels,
                            const CrossEntropyOptions& options, CallSite site) {
  CrossEntropy ce = cross_entropy("softmax_cross_entropy", logits, labels, options, site);
  if (!ce.label_weight.defined()) return mean(ce.loss, {}, false, site);
  return div(sum(ce.loss, {}, false, site), sum(ce.label_weight, {}, false, site), site);
}

void check_labels_in_range(const Array& labels, int64_t num_classes, CallSite site) {
  if (!labels.defined() || !is_integer(labels.dtype())) {
    fail(site, fmt::format("nn::check_labels_in_range: labels must be integer class indices, "
                           "got {}",
                           labels.defined() ? labels.aval().to_string() : "an empty Array"));
  }
  std::vector<int64_t> values = astype(labels, DType::i64, site).to_vector<int64_t>(site);
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i] < 0 || values[i] >= num_classes) {
      fail(site,
           fmt::format("nn::check_labels_in_range: label {} (flat index {} of labels {}) is "
                       "outside [0, {})",
                       values[i], i, labels.aval().to_string(), num_classes),
           "check the dataset's labels and the model's number of classes");
    }
  }
}

Array binary_cross_entropy_with_logits(const Array& logits, const Array& targets,
                                       const Array& pos_weight, CallSite site) {
  constexpr std::string_view kOp = "binary_cross_entropy_with_logits";
  check_float_arg(kOp, "logits", logits, site);
  check_float_arg(kOp, "targets", targets, site);
  check_same_shape(kOp, "logits", logits, "targets", targets, site);
  Array y = astype(targets, logits.dtype(), site);
  // softplus(-x) = log(1 + e^-x) = -log sigmoid(x), computed stably.
  Array log_one_plus = softplus(neg(logits, site), site);
  if (!pos_weight.defined()) {
    // (1 - y) x + softplus(-x)
    return mean(add(mul(sub(weak(1, y, site), y, site), logits, site), log_one_plus, site), {},
                false, site);
  }
  check_float_arg(kOp, "pos_weight", pos_weight, site);
  int64_t last = logits.rank() == 0 ? 1 : logits.dim(-1);
  bool fits = pos_weight.rank() == 0 ||
              (pos_weight.rank() == 1 && (pos_weight.dim(0) == 1 || pos_weight.dim(0) == last));
  if (!fits) {
    fail(site, fmt::format("nn::{}: pos_weight {} must be a scalar or have one weight per entry of "
                           "the last axis of logits {}, [{}]",
                           kOp, pos_weight.aval().to_string(), logits.aval().to_string(), last));
  }
  Array pw = astype(pos_weight, logits.dtype(), site);
  // PyTorch's stable form: (1 - y) x + (1 + (pw - 1) y) softplus(-x).
  Array scale = add(weak(1, y, site), mul(sub(pw, weak(1, pw, site), site), y, site), site);
  return mean(
      add(mul(sub(weak(1, y, site), y, site), logits, site), mul(scale, log_one_plus, site), site),
      {}, false, site);
}

Array mse(const Array& predictions, const Array& targets, CallSite site) {
  check_float_arg("mse", "predictions", predictions, site);
  check_float_arg("mse", "targets", targets, site);
  check_same_shape("mse", "predictions", predictions, "targets", targets, site);
  Array error = sub(predictions, targets, site);
  return mean(mul(error, error, site), {}, false, site);
}

Array huber(const Array& predictions, const Array& targets, double delta, CallSite site) {
  check_float_arg("huber", "predictions", predictions, site);
  check_float_arg("huber", "targets", targets, site);
  check_same_shape("huber", "predictions", predictions, "targets", targets, site);
  if (!(delta > 0) || !std::isfinite(delta)) {
    fail(site, fmt::format("nn::huber: delta must be positive and finite, got {}", delta));
  }
  Array error = sub(predictions, targets, site);
  Array magnitude = abs(error, site);
  Array quadratic = mul(weak(0.5, error, site), mul(error, error, site), site);
  Array linear =
      mul(weak(delta, error, site), sub(magnitude, weak(0.5 * delta, error, site), site), site);
  return mean(where(less_equal(magnitude, weak(delta, error, site), site), quadratic, linear, site),
              {}, false, site);
}

Array focal_loss(const Array& logits, const Array& labels, double gamma, double alpha,
                 CallSite site) {
  check_logits_and_labels("focal_loss", logits, labels, site);
  if (!(gamma >= 0) || !std::isfinite(gamma)) {
    fail(site, fmt::format("nn::focal_loss: gamma must be non-negative and finite, got {}", gamma));
  }
  Labels l = clamp_labels(labels, logits.dim(-1), site);
  Array logp_t = take_along_axis(log_softmax(logits, -1, site), l.clamped, -1, site);
  // 1 - p_t as -expm1(log p_t): accurate when p_t is close to 1.
  Array one_minus_p = neg(expm1(logp_t, site), site);
  Array modulation;
  if (gamma == std::floor(gamma) && gamma <= 16) {
    // Integer powers by multiplication: pow's derivative b * a^(b-1) is NaN at a = 0 for
    // b = 0, and needs a log of a otherwise.
    modulation = ones_like(one_minus_p, site);
    for (int i = 0; i < static_cast<int>(gamma); ++i) {
      modulation = mul(modulation, one_minus_p, site);
    }
  } else {
    // Keep pow away from a = 0, where a^(gamma-1) is infinite for gamma < 1.
    Array positive = greater(one_minus_p, zeros_like(one_minus_p, site), site);
    Array safe = where(positive, one_minus_p, ones_like(one_minus_p, site), site);
    modulation = where(positive, pow(safe, weak(gamma, safe, site), site),
                       zeros_like(one_minus_p, site), site);
  }
  Array loss = mul(weak(-alpha, logp_t, site), mul(modulation, logp_t, site), site);
  return mean(nan_where_invalid(loss, l.valid, site), {}, false, site);
}

Array margin_ranking(const Array& x1, const Array& x2, const Array& y, double margin,
                     CallSite site) {
  constexpr std::string_view kOp = "margin_ranking";
  check_float_arg(kOp, "x1", x1, site);
  check_float_arg(kOp, "x2", x2, site);
  check_same_shape(kOp, "x1", x1, "x2", x2, site);
  check_same_shape(kOp, "x1", x1, "y", y, site);
  if (y.dtype() == DType::bool_) {
    fail(site,
         fmt::format("nn::{}: y {} must hold 1 or -1, not booleans", kOp, y.aval().to_string()),
         "convert with where(b, 1, -1) or astype");
  }
  Array sign = astype(y, x1.dtype(), site);
  Array hinge = add(mul(neg(sign, site), sub(x1, x2, site), site), weak(margin, x1, site), site);
  return mean(maximum(hinge, zeros_like(hinge, site), site), {}, false, site);
}

}  // namespace kiln::nn
