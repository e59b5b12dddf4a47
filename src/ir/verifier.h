// Checking that a Program is well formed: SSA (every variable defined once, before it is
// used; the outputs defined), each equation's arity and params kind, and its recorded
// result types against its primitive's shape rule, run again. Programs from tracing, from
// transformations and from text (ir/parser.h) all pass; a failure is a bug in whatever
// made the program.
//
//   kiln::verify(program);  // throws a kiln::Error naming the equation and its text
#pragma once

#include "ir/program.h"

namespace kiln {

// Errors name the equation (index and primitive) and show its printed line.
void verify(const Program& program);

}  // namespace kiln
