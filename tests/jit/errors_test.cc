// A kernel that fails inside a compiled program reports what eager mode reports: the
// primitive that failed and the user's line that called it, whether the primitive runs as
// its own kernel or as a member of a fused group, at top level or inside a scan body.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kiln/control_flow.h"
#include "kiln/jit.h"
#include "kiln/ops.h"
#include "support/errors.h"

namespace kiln {
namespace {

using testing::error_of;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

Array int32s(std::vector<int32_t> values, Shape shape) {
  return from_host<int32_t>(values, std::move(shape));
}

// What eager mode reports for a division by zero called at `line` of this file.
void expect_division_error_at(const std::string& text, int line) {
  EXPECT_THAT(text, StartsWith("div failed while running: integer division by zero\n"));
  EXPECT_THAT(text, HasSubstr(fmt::format("errors_test.cc:{}", line)));
}

TEST(JitErrors, EagerDivisionByZeroNamesThePrimitiveAndLine) {  // the reference the others match
  Array x = int32s({6, 7, 8}, {3}), y = int32s({1, 0, 2}, {3});
  const int line = __LINE__ + 1;
  std::string text = error_of([&] { (x / y + 1).block_until_ready(); });
  expect_division_error_at(text, line);
}

TEST(JitErrors, AnUnfusedKernelsErrorNamesItsPrimitiveAndLine) {
  const int line = __LINE__ + 1;
  auto f = [](const Array& x, const Array& y) { return x / y; };
  Array x = int32s({6, 7, 8}, {3}), y = int32s({1, 0, 2}, {3});
  auto jitted = jit(f);
  ASSERT_THAT(jitted.compile(x, y).steps_text(), Not(HasSubstr("fused[")));
  expect_division_error_at(error_of([&] { jitted(x, y).block_until_ready(); }), line);
}

TEST(JitErrors, AFusedMembersErrorNamesItsPrimitiveAndLine) {
  const int line = __LINE__ + 1;
  auto f = [](const Array& x, const Array& y) { return x / y + 1; };
  // Enough elements for several tiles and chunks, the zero divisor in a late one.
  std::vector<int32_t> divisors(100000, 3);
  divisors[77777] = 0;
  Array x = int32s(std::vector<int32_t>(divisors.size(), 9), {100000});
  Array y = int32s(divisors, {100000});
  auto jitted = jit(f);
  ASSERT_THAT(jitted.compile(x, y).steps_text(), HasSubstr("fused[2]"));
  expect_division_error_at(error_of([&] { jitted(x, y).block_until_ready(); }), line);
}

TEST(JitErrors, AFusedErrorInsideAScanBodyNamesItsPrimitiveAndLine) {
  const int line = __LINE__ + 3;
  auto f = [](const Array& init, const Array& xs) {
    auto body = [](const Array& carry, const Array& x) {
      Array next = carry / x + 1;
      return std::pair{next, next};
    };
    return scan(body, init, xs).first;
  };
  Array init = int32s({6, 7, 8}, {3});
  Array xs = int32s({1, 1, 1, 2, 0, 2}, {2, 3});
  auto jitted = jit(f);
  ASSERT_THAT(jitted.compile(init, xs).steps_text(), HasSubstr("scan"));
  expect_division_error_at(error_of([&] { jitted(init, xs).block_until_ready(); }), line);
}

}  // namespace
}  // namespace kiln
