// The messages (without site or hint) of the errors the IR's parser and verifier raise,
// or "" when they raise none: what the ir tests assert on.
#pragma once

#include <string>
#include <string_view>

#include "ir/parser.h"
#include "ir/verifier.h"
#include "kiln/error.h"

namespace kiln::testing {

inline std::string parse_error(std::string_view text) {
  try {
    parse_program(text);
  } catch (const Error& error) {
    return error.message();
  }
  return "";
}

inline std::string verify_error(const Program& program) {
  try {
    verify(program);
  } catch (const Error& error) {
    return error.message();
  }
  return "";
}

}  // namespace kiln::testing
