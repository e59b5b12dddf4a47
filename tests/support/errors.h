// Helpers for testing kiln's user-facing errors.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>

#include "kiln/error.h"

namespace kiln::testing {

// The message of the kiln::Error that `fn` throws, or "" if it throws none.
inline std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

// Success when `fn` throws a kiln::Error whose message contains every one of `parts`.
inline ::testing::AssertionResult fails_with(const std::function<void()>& fn,
                                             std::initializer_list<std::string_view> parts) {
  std::string message = error_of(fn);
  if (message.empty()) return ::testing::AssertionFailure() << "no kiln::Error was thrown";
  for (std::string_view part : parts) {
    if (message.find(part) == std::string::npos) {
      return ::testing::AssertionFailure() << "'" << part << "' is not in the error:\n" << message;
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace kiln::testing
