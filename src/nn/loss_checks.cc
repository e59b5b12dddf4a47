// Argument checks shared by the losses and metrics; see loss_checks.h.
#include "nn/loss_checks.h"

#include <fmt/format.h>

namespace kiln::nn::detail {
namespace {

void check_defined(std::string_view op, std::string_view role, const Array& x, CallSite site) {
  if (!x.defined()) {
    fail(site, fmt::format("nn::{}: {} is an empty Array (default-constructed)", op, role));
  }
}

}  // namespace

void check_float_arg(std::string_view op, std::string_view role, const Array& x, CallSite site) {
  check_defined(op, role, x, site);
  if (!is_floating(x.dtype())) {
    fail(site,
         fmt::format("nn::{}: {} must have a floating-point dtype, got {}", op, role,
                     x.aval().to_string()),
         "convert it first, e.g. astype(x, DType::f32)");
  }
}

void check_logits_and_labels(std::string_view op, const Array& logits, const Array& labels,
                             CallSite site) {
  check_float_arg(op, "logits", logits, site);
  check_defined(op, "labels", labels, site);
  if (logits.rank() == 0) {
    fail(site,
         fmt::format("nn::{}: logits {} must have a class axis (rank >= 1)", op,
                     logits.aval().to_string()),
         "logits are [batch..., classes]");
  }
  if (!is_integer(labels.dtype())) {
    fail(site,
         fmt::format("nn::{}: labels must be integer class indices, got {} (logits {})", op,
                     labels.aval().to_string(), logits.aval().to_string()),
         "labels are class numbers, not one-hot or probabilities; convert with "
         "astype(labels, DType::i32) or use binary_cross_entropy_with_logits for soft targets");
  }
  Shape batch = logits.shape();
  batch.dims().pop_back();
  if (labels.shape() != batch) {
    fail(site,
         fmt::format("nn::{}: labels {} must have the shape of logits {} without the class "
                     "axis, {}",
                     op, labels.aval().to_string(), logits.aval().to_string(), batch.to_string()),
         "one label per example: logits [batch, classes] go with labels [batch]");
  }
}

void check_same_shape(std::string_view op, std::string_view role_a, const Array& a,
                      std::string_view role_b, const Array& b, CallSite site) {
  check_defined(op, role_a, a, site);
  check_defined(op, role_b, b, site);
  if (a.shape() != b.shape()) {
    fail(site,
         fmt::format("nn::{}: {} {} and {} {} must have the same shape", op, role_a,
                     a.aval().to_string(), role_b, b.aval().to_string()),
         "losses do not broadcast (a silent broadcast of [batch] against [batch, 1] is a "
         "classic bug); reshape one of them");
  }
}

}  // namespace kiln::nn::detail
