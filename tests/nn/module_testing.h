// Helpers shared by the module tests (tests/nn/module_*_test.cc): inputs drawn from explicit
// keys, host values as doubles, and element-wise closeness of a result to values the test
// computed with plain loops.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "kiln/nn/module.h"
#include "kiln/ops.h"
#include "kiln/random.h"
#include "support/arrays.h"

namespace kiln::nn::testing {

inline Array normal_input(uint64_t seed, Shape shape, DType dtype = DType::f32) {
  return random::normal(random::key(seed), std::move(shape), dtype);
}

inline AbstractValue f32_type(Shape shape) {
  return AbstractValue(std::move(shape), DType::f32);
}

// Every element of `actual` is within atol + rtol * |expected| of `expected`.
inline ::testing::AssertionResult all_close(const Array& actual,
                                            const std::vector<double>& expected, double rtol = 1e-5,
                                            double atol = 1e-5) {
  std::vector<double> got = kiln::testing::values(actual);
  if (got.size() != expected.size()) {
    return ::testing::AssertionFailure()
           << "sizes differ: " << got.size() << " vs " << expected.size();
  }
  for (size_t i = 0; i < got.size(); ++i) {
    if (!(std::abs(got[i] - expected[i]) <= atol + rtol * std::abs(expected[i]))) {
      return ::testing::AssertionFailure()
             << "element " << i << ": got " << got[i] << ", expected " << expected[i];
    }
  }
  return ::testing::AssertionSuccess();
}

inline ::testing::AssertionResult all_close(const Array& actual, const Array& expected,
                                            double rtol = 1e-5, double atol = 1e-5) {
  if (actual.shape() != expected.shape()) {
    return ::testing::AssertionFailure() << "shapes differ: " << actual.aval().to_string() << " vs "
                                         << expected.aval().to_string();
  }
  return all_close(actual, kiln::testing::values(expected), rtol, atol);
}

}  // namespace kiln::nn::testing
