// Shared by the loss tests: small hand-made logits and labels, a double-precision
// log-softmax, and conversions between std::vectors and arrays.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kiln/ops.h"

namespace kiln::nn::loss_testing {

using Matrix = std::vector<std::vector<double>>;

inline std::vector<double> log_softmax_row(const std::vector<double>& row) {
  double m = -INFINITY;
  for (double v : row) m = std::max(m, v);
  double total = 0;
  for (double v : row) total += std::exp(v - m);
  std::vector<double> out;
  for (double v : row) out.push_back(v - m - std::log(total));
  return out;
}

// The rows as a [rows, columns] array of `dtype`.
inline Array matrix(const Matrix& rows, DType dtype = DType::f64) {
  std::vector<double> flat;
  for (const auto& row : rows) flat.insert(flat.end(), row.begin(), row.end());
  return astype(from_host<double>(flat, Shape{static_cast<int64_t>(rows.size()),
                                              static_cast<int64_t>(rows.at(0).size())}),
                dtype);
}

inline Array labels_of(const std::vector<int>& labels) {
  return from_host<int32_t>(std::vector<int32_t>(labels.begin(), labels.end()),
                            Shape{static_cast<int64_t>(labels.size())});
}

// Five examples of four classes, and their labels.
inline const Matrix kLogits = {{2.0, -1.0, 0.5, 0.0},
                               {-0.3, 0.8, 1.7, -2.2},
                               {5.0, 5.0, -5.0, 1.0},
                               {0.1, 0.2, 0.3, 0.4},
                               {-4.0, 3.0, 0.0, 2.5}};
inline const std::vector<int> kLabels = {0, 2, 1, 3, 1};

inline double scalar_of(const Array& x) {
  EXPECT_EQ(x.rank(), 0);
  return x.item<double>();
}

}  // namespace kiln::nn::loss_testing
