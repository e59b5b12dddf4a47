// The jit compiler's program-to-program passes. Each pass is a pure function of a Program
// (no global state), small, separately tested, and keeps results bit-identical to running
// the input program eagerly: a pass never reorders floating-point operations or replaces
// an operation by one that rounds differently.
//
// The pipeline (jit/pipeline.cc) runs them in order and can dump the program
// before and after each one (KILN_DUMP_IR).
#pragma once

#include <cstdint>

#include "ir/program.h"

namespace kiln {

// Removes equations whose results reach no output, and inputs' uses that vanish with
// them (inputs themselves stay: they are the program's signature). Constants nothing uses
// are dropped.
Program eliminate_dead_code(const Program& program);

// Merges equations that apply the same primitive with equal params to the same operands
// (after earlier merges): the later one's results are replaced by the earlier one's.
// Primitives that must not be merged (random bits are pure here, so they may; an
// optimization barrier may not) are left alone.
Program eliminate_common_subexpressions(const Program& program);

struct ConstantFoldingOptions {
  // Results larger than this are not folded: a broadcast of a scalar to a large shape is
  // cheaper to compute than to keep as a constant.
  int64_t max_folded_elements = 4096;
};
// Evaluates equations whose operands are all constants (or that have no operands, e.g.
// iota) at compile time, with the same kernels eager mode uses, and makes their results
// constants of the program.
Program fold_constants(const Program& program, const ConstantFoldingOptions& options = {});

// Local rewrites that give bit-identical results: x*1, x/1, x-0, neg(neg(x)),
// convert/reshape/transpose/broadcast to the same type, transposes of transposes, reshapes
// of reshapes, select(c, x, x); integer-only rewrites such as x+0 and x*0. (x+0 is not x
// for floats: -0 + 0 is +0.)
Program simplify_algebra(const Program& program);

// Replaces a scan by a later scan over the same operands whose body is the same equations
// with more outputs (value_and_grad's primal scan and the scan its VJP runs to stack
// residuals): the wider scan moves to the narrower one's position and its leading results
// stand for the narrower one's, so the loop runs once. Runs after common subexpressions
// (which makes equal operands the same variables).
Program merge_scans(const Program& program);

// Gives each elementwise equation that reads a cheap broadcast (an operand at most 1/8 of
// its result) and is not its first reader a copy of that broadcast of its own, just before
// it: the fusion planner then fuses every copy into its consumer's loop instead of writing
// the broadcast to memory once for all of them. Runs after common subexpressions (which
// would merge the copies again), when fusion is on.
Program clone_broadcasts(const Program& program);

}  // namespace kiln
