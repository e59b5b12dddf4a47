// The ops tests' check of a primitive's abstract-evaluation rule on its own, as a
// transformation or a bad caller would reach it (no op in front to catch the mistake).
#pragma once

#include <gtest/gtest.h>

#include <initializer_list>
#include <string_view>
#include <vector>

#include "prims/bind.h"
#include "support/errors.h"

namespace kiln::testing {

// Success when the rule of `prim` refuses `inputs` and `params` with an error naming every
// one of `parts`.
inline ::testing::AssertionResult rule_fails(PrimId prim, std::vector<AbstractValue> inputs,
                                             const Params& params,
                                             std::initializer_list<std::string_view> parts) {
  return fails_with([&] { abstract_eval(prim, inputs, params, CallSite()); }, parts);
}

}  // namespace kiln::testing
