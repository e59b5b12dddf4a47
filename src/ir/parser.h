// Reading program text back into a Program: what print_program writes (and the same text
// with other variable names, spacing or line breaks). docs/ir.md gives the grammar.
//
//   Program p = kiln::parse_program(
//       "{ lambda ; a:f32[3]. let b:f32[3] = mul a 2.0:f32~[] in (b) }");
//
// Constants declared before ';' have no values; literals (2.0:f32~[]) become rank-0
// constants with their values, so a program whose only constants are literals can run.
// Each equation is checked with its primitive's shape rule as it is read, so the result
// is well typed (verify() passes). Errors are kiln::Errors that say where and what was
// expected: "program text 3:17: expected ']' after the params of dot_general, found 'a'".
#pragma once

#include <string_view>

#include "ir/program.h"

namespace kiln {

Program parse_program(std::string_view text);

}  // namespace kiln
