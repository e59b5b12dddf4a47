// The jit compiler's pass pipeline: custom calls inlined, then the simplification passes
// of transforms/passes in a fixed order. KILN_DUMP_IR=dir writes the program before and
// after every pass (and the executable's steps and memory plan) as text files in dir, and
// the time each step took, rewritten after every call.
#pragma once

#include <string>
#include <vector>

#include "ir/program.h"

namespace kiln::detail {

// Writes the dumps of one compilation, numbering the files in order, when KILN_DUMP_IR is
// set; does nothing otherwise.
class IrDumper {
 public:
  explicit IrDumper(const std::string& name);
  bool enabled() const { return !directory_.empty(); }
  void write(const std::string& stage, const std::string& text);
  // The path of a file of this compilation that is rewritten as it changes (not numbered):
  // "<dir>/<name>.<compilation>.<stage>.txt", or "" when dumping is off.
  std::string path_of(const std::string& stage) const;

 private:
  std::string directory_;
  std::string prefix_;
  int next_ = 0;
};

// Replaces every custom_vjp_call by the equations of its forward function (a compiled
// program never differentiates, so the custom rule is not needed any more).
Program inline_custom_calls(const Program& program);

// The optimised program; `fuse`: prepared for the fusion planner (clone_broadcasts).
Program optimize(const Program& program, IrDumper& dumper, bool fuse);

}  // namespace kiln::detail
