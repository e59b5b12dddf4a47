// `kiln kernels check`: each shipped kernel (kiln/pallas.h) against an independent
// reference, the plain program of the same math in f64, over shapes (empty, 1, tiles that
// do not divide, several tiles), block sizes, dtypes and special values, each error held to
// a bound per dtype.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace kiln::pallas {

struct KernelCheck {
  std::string kernel;  // "matmul"
  std::string what;    // "f32 37x29 @ 29x53, blocks 16x16x16"
  double max_abs_error = 0;
  double max_rel_error = 0;  // |error| / |reference| over the elements whose reference is not 0
  double max_ulps = 0;       // |error| in units in the last place of the result's dtype
  // The largest error as a share of its element's bound (atol + ulps x ulp): <= 1 passes.
  double worst_share_of_bound = 0;
  std::string bound;  // how the bound is made, for the report
  bool ok =
      false;  // every element within its bound, NaN and infinities where the reference has them
};

std::vector<std::string> kernel_names();
// The checks of `name` ("" for every kernel); `progress` is called before each case.
std::vector<KernelCheck> check_kernels(
    const std::string& name, const std::function<void(const std::string&)>& progress = {});

}  // namespace kiln::pallas
