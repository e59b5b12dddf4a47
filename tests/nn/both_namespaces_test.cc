// Code that uses both kiln and kiln::nn calls the activations and the elementwise ops by
// their plain names: nothing is declared twice (this file would not compile otherwise).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "kiln/nn.h"
#include "kiln/ops.h"

namespace {

TEST(BothNamespaces, PlainNamesResolve) {
  using namespace kiln;      // NOLINT: the point of the test
  using namespace kiln::nn;  // NOLINT
  Array x = from_host<double>({-1.0, 0.5}, {2});
  std::vector<double> t = tanh(x).to_vector<double>();
  std::vector<double> s = sigmoid(x).to_vector<double>();
  EXPECT_DOUBLE_EQ(t[0], std::tanh(-1.0));
  EXPECT_NEAR(s[1], 1 / (1 + std::exp(-0.5)), 1e-15);
  EXPECT_DOUBLE_EQ(relu(x).to_vector<double>()[0], 0.0);
}

}  // namespace
