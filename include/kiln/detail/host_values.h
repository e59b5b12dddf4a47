// Internals of kiln/ops.h that its templates and kiln's own layers need, but users do not:
// the check behind from_host and the weakly typed scalar beside an array. Not part of
// the public API; names and signatures may change.
#pragma once

#include <cstddef>

#include "kiln/array.h"
#include "kiln/shape.h"

namespace kiln::detail {

// Raises the error for `count` host values that do not fill `shape`.
void check_host_size(size_t count, const Shape& shape, CallSite site);

// A C++ number in an expression with an array is weakly typed: it takes the array's
// dtype when it can (`x * 2.0` stays bf16 for a bf16 x), as in JAX. `is_float` says
// whether the number was written as a floating-point one.
Array weak_scalar_like(double value, bool is_float, const Array& like, CallSite site = {});

}  // namespace kiln::detail
