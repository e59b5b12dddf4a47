// Shared checks for the jit passes' tests (pass_*_test.cc): random inputs with special
// values, running a program eagerly, and comparing two programs' results bit for bit (a
// pass must give exactly what the original program gives).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "kiln/ops.h"
#include "transforms/eval.h"

namespace kiln::testing {

// Values of `aval`'s type: floats mix ordinary values with -0, +0, NaN, +-Inf and 1;
// integers are small with the odd extreme; bools are random.
inline Array random_array(const AbstractValue& aval, std::mt19937& rng) {
  std::vector<std::byte> bytes(static_cast<size_t>(aval.size_bytes()));
  visit_dtype(aval.dtype, [&](auto tag) {
    using S = storage_t<decltype(tag)::value>;
    std::uniform_int_distribution<int> pick(0, 15);
    std::uniform_real_distribution<double> real(-4, 4);
    for (int64_t i = 0; i < aval.num_elements(); ++i) {
      S value{};
      int choice = pick(rng);
      if constexpr (std::is_same_v<S, bool>) {
        value = choice % 2 == 0;
      } else if constexpr (std::is_integral_v<S>) {
        if (choice == 0) {
          value = std::numeric_limits<S>::min();
        } else if (choice == 1) {
          value = std::numeric_limits<S>::max();
        } else {
          value = static_cast<S>(std::is_signed_v<S> ? choice - 8 : choice);
        }
      } else {
        double specials[] = {-0.0,
                             0.0,
                             std::numeric_limits<double>::quiet_NaN(),
                             std::numeric_limits<double>::infinity(),
                             -std::numeric_limits<double>::infinity(),
                             1.0};
        double x = choice < 6 ? specials[choice] : real(rng);
        if constexpr (std::is_same_v<S, f16> || std::is_same_v<S, bf16>) {
          value = S::from_float(static_cast<float>(x));
        } else {
          value = static_cast<S>(x);
        }
      }
      std::memcpy(bytes.data() + static_cast<size_t>(i) * sizeof(S), &value, sizeof(S));
    }
  });
  return from_host_bytes(bytes.data(), aval, nullptr, CallSite());
}

inline std::vector<Array> random_inputs(const Program& program, std::mt19937& rng) {
  std::vector<Array> inputs;
  for (VarId var : program.inputs) inputs.push_back(random_array(program.aval(var), rng));
  return inputs;
}

// A program's outputs on `inputs` as host bytes, or the error it raised (eager errors are
// raised when the values are read).
struct Outcome {
  std::vector<HostArray> outputs;
  std::string error;
};
inline Outcome run(const Program& program, const std::vector<Array>& inputs) {
  Outcome outcome;
  try {
    for (const Array& output : eval_program(program, inputs, CallSite()))
      outcome.outputs.push_back(output.to_host());
  } catch (const Error& error) {
    outcome.outputs.clear();
    outcome.error = error.what();
  }
  return outcome;
}

// Success when `after` is well typed and gives exactly `before`'s results (same types,
// same bytes; NaNs included) or the same error, on `trials` sets of random inputs.
inline ::testing::AssertionResult same_results(const Program& before, const Program& after,
                                               int trials = 4) {
  try {
    verify(after);
  } catch (const Error& error) {
    return ::testing::AssertionFailure() << "the result does not verify: " << error.what();
  }
  if (before.inputs.size() != after.inputs.size() ||
      before.outputs.size() != after.outputs.size()) {
    return ::testing::AssertionFailure() << "the signature changed:\n" << print_program(after);
  }
  std::mt19937 rng(1234);
  for (int trial = 0; trial < trials; ++trial) {
    std::vector<Array> inputs = random_inputs(before, rng);
    Outcome expected = run(before, inputs);
    Outcome got = run(after, inputs);
    if (expected.error != got.error) {
      return ::testing::AssertionFailure()
             << "errors differ: '" << expected.error << "' vs '" << got.error << "'";
    }
    for (size_t i = 0; i < expected.outputs.size(); ++i) {
      const HostArray& a = expected.outputs[i];
      const HostArray& b = got.outputs[i];
      if (!(a.aval == b.aval)) {
        return ::testing::AssertionFailure() << "output " << i << " is " << b.aval.to_string()
                                             << ", expected " << a.aval.to_string();
      }
      if (a.bytes != b.bytes) {
        return ::testing::AssertionFailure()
               << "output " << i << " differs in its bits (trial " << trial << ")\n"
               << print_program(after);
      }
    }
  }
  return ::testing::AssertionSuccess();
}

inline int64_t count_prim(const Program& program, PrimId prim) {
  int64_t count = 0;
  for (const Equation& equation : program.equations) count += equation.prim == prim ? 1 : 0;
  return count;
}

}  // namespace kiln::testing
