// Array's convenience methods, each forwarding to the free op of the same name.
#include "kiln/ops.h"

namespace kiln {

Array Array::astype(DType dtype, CallSite site) const {
  return kiln::astype(*this, dtype, site);
}
Array Array::reshape(Shape shape, CallSite site) const {
  return kiln::reshape(*this, std::move(shape), site);
}
Array Array::transpose(CallSite site) const {
  return kiln::transpose(*this, {}, site);
}
Array Array::sum(CallSite site) const {
  return kiln::sum(*this, {}, false, site);
}
Array Array::sum(Dims axes, bool keepdims, CallSite site) const {
  return kiln::sum(*this, std::move(axes), keepdims, site);
}
Array Array::mean(CallSite site) const {
  return kiln::mean(*this, {}, false, site);
}

}  // namespace kiln
