// TEMPORARY during development: ops whose primitives are being written. Each helper
// removes its ops from here as it implements them. Must be empty before commit.
#include "kiln/ops.h"

#define KILN_PENDING() fail(site, fmt::format("{} is not implemented yet", __func__))

namespace kiln {

Array full(Shape, double, DType, Device*, CallSite site) {
  KILN_PENDING();
}
Array zeros(Shape, DType, Device*, CallSite site) {
  KILN_PENDING();
}
Array ones(Shape, DType, Device*, CallSite site) {
  KILN_PENDING();
}
Array zeros_like(const Array&, CallSite site) {
  KILN_PENDING();
}
Array ones_like(const Array&, CallSite site) {
  KILN_PENDING();
}
Array iota(DType, Shape, int64_t, Device*, CallSite site) {
  KILN_PENDING();
}
Array arange(double, double, double, DType, Device*, CallSite site) {
  KILN_PENDING();
}
Array arange(int64_t, DType, Device*, CallSite site) {
  KILN_PENDING();
}
Array linspace(double, double, int64_t, DType, Device*, CallSite site) {
  KILN_PENDING();
}
Array transpose(const Array&, Dims, CallSite site) {
  KILN_PENDING();
}
Array broadcast_to(const Array&, Shape, CallSite site) {
  KILN_PENDING();
}
Array broadcast_in_dim(const Array&, Shape, Dims, CallSite site) {
  KILN_PENDING();
}
Array expand_dims(const Array&, int64_t, CallSite site) {
  KILN_PENDING();
}
Array squeeze(const Array&, Dims, CallSite site) {
  KILN_PENDING();
}
Array slice(const Array&, Dims, Dims, Dims, CallSite site) {
  KILN_PENDING();
}
Array dynamic_slice(const Array&, const Array&, Dims, CallSite site) {
  KILN_PENDING();
}
Array dynamic_update_slice(const Array&, const Array&, const Array&, CallSite site) {
  KILN_PENDING();
}
Array concatenate(std::span<const Array>, int64_t, CallSite site) {
  KILN_PENDING();
}
Array concatenate(std::initializer_list<Array>, int64_t, CallSite site) {
  KILN_PENDING();
}
Array stack(std::span<const Array>, int64_t, CallSite site) {
  KILN_PENDING();
}
Array pad(const Array&, Dims, Dims, Dims, double, CallSite site) {
  KILN_PENDING();
}
Array take(const Array&, const Array&, int64_t, std::optional<IndexMode>, CallSite site) {
  KILN_PENDING();
}
Array take_along_axis(const Array&, const Array&, int64_t, CallSite site) {
  KILN_PENDING();
}
Array one_hot(const Array&, int64_t, DType, CallSite site) {
  KILN_PENDING();
}
Array::IndexedUpdate Array::at(const Array&, CallSite site) const {
  KILN_PENDING();
}
Array Array::IndexedUpdate::set(const Array&) const {
  CallSite site = site_;
  KILN_PENDING();
}
Array Array::IndexedUpdate::add(const Array&) const {
  CallSite site = site_;
  KILN_PENDING();
}
Array Array::IndexedUpdate::set(double) const {
  CallSite site = site_;
  KILN_PENDING();
}
Array Array::IndexedUpdate::add(double) const {
  CallSite site = site_;
  KILN_PENDING();
}
Array sum(const Array&, Dims, bool, CallSite site) {
  KILN_PENDING();
}
Array mean(const Array&, Dims, bool, CallSite site) {
  KILN_PENDING();
}
Array max(const Array&, Dims, bool, CallSite site) {
  KILN_PENDING();
}
Array min(const Array&, Dims, bool, CallSite site) {
  KILN_PENDING();
}
Array prod(const Array&, Dims, bool, CallSite site) {
  KILN_PENDING();
}
Array argmax(const Array&, int64_t, DType, CallSite site) {
  KILN_PENDING();
}
Array argmin(const Array&, int64_t, DType, CallSite site) {
  KILN_PENDING();
}
Array cumsum(const Array&, int64_t, bool, CallSite site) {
  KILN_PENDING();
}
Array matmul(const Array&, const Array&, CallSite site) {
  KILN_PENDING();
}
Array dot_general(const Array&, const Array&, Dims, Dims, Dims, Dims, std::optional<DType>,
                  CallSite site) {
  KILN_PENDING();
}
Array conv2d(const Array&, const Array&, Dims, Padding, Dims, int64_t, CallSite site) {
  KILN_PENDING();
}
Array conv_general_dilated(const Array&, const Array&, Dims, Dims, Dims, Dims, Dims, int64_t,
                           CallSite site) {
  KILN_PENDING();
}
Array max_pool(const Array&, Dims, Dims, Padding, CallSite site) {
  KILN_PENDING();
}
Array avg_pool(const Array&, Dims, Dims, Padding, CallSite site) {
  KILN_PENDING();
}

}  // namespace kiln
