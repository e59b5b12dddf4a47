// Merging a scan into a wider one over the same operands (passes.h).
//
// value_and_grad of a function with a scan holds two forward scans: the primal one, and
// the one scan's VJP runs to stack what its backward pass needs (the carry each step
// receives, the costly results). The second's body is the first's with more outputs, so its
// leading results are the first's, bit for bit. The first is replaced, at its own position,
// by the second, whose later copy is dropped: the loop runs once. Bodies are compared by
// their printed text (the printer names variables canonically), so only bodies that are the
// same equations in the same order merge; constants other than rank-0 values print without
// their values, so those must be the very same arrays as well.
#include <string>
#include <vector>

#include "ir/printer.h"
#include "prims/ids/control_flow.h"
#include "transforms/passes/passes.h"
#include "transforms/passes/program_rewrite.h"

namespace kiln {
namespace {

// The loop itself: everything but the body and the gradient option (which only changes
// how a VJP is built, not what the scan computes).
bool same_loop(const ScanParams& a, const ScanParams& b) {
  return a.length == b.length && a.num_consts == b.num_consts && a.num_carry == b.num_carry &&
         a.reverse == b.reverse && a.unroll == b.unroll;
}

// The text of `body` with only its first `count` outputs.
std::string body_text(const Program& body, size_t count) {
  Program prefix = body;
  prefix.outputs.resize(count);
  return print_program(prefix);
}

// Whether the two bodies' constants hold the same values, position by position: concrete
// rank-0 values print inline (the text compares them); any other must be the same array. A body
// without values (a parsed one) has none to differ.
bool same_constant_arrays(const Program& a, const Program& b) {
  if (a.constant_values.size() != b.constant_values.size()) return false;
  for (size_t i = 0; i < a.constant_values.size(); ++i) {
    const Array& x = a.constant_values[i];
    const Array& y = b.constant_values[i];
    bool printed_inline = is_concrete(x) && is_concrete(y) && x.rank() == 0 && y.rank() == 0;
    if (!printed_inline && x.impl() != y.impl()) return false;
  }
  return true;
}

// Whether scan `wide`'s leading results are scan `narrow`'s.
bool computes_prefix(const Equation& narrow, const Equation& wide) {
  if (narrow.inputs != wide.inputs || narrow.outputs.size() > wide.outputs.size()) return false;
  const auto& n = std::get<ScanParams>(narrow.params);
  const auto& w = std::get<ScanParams>(wide.params);
  if (!same_loop(n, w)) return false;
  const Program& narrow_body = *n.body.program;
  const Program& wide_body = *w.body.program;
  size_t count = narrow_body.outputs.size();
  return count <= wide_body.outputs.size() && same_constant_arrays(narrow_body, wide_body) &&
         print_program(narrow_body) == body_text(wide_body, count);
}

}  // namespace

Program merge_scans(const Program& program) {
  const std::vector<Equation>& equations = program.equations;
  // For each scan, the later scan that replaces it (first match in program order).
  std::vector<int64_t> replaced_by(equations.size(), -1);
  std::vector<bool> moved(equations.size(), false);
  for (size_t a = 0; a < equations.size(); ++a) {
    if (equations[a].prim != prim::scan || moved[a]) continue;
    for (size_t b = a + 1; b < equations.size(); ++b) {
      if (equations[b].prim != prim::scan || moved[b]) continue;
      // Same operands, loop and leading body outputs (their types printed with them), so
      // the leading results have the narrow scan's types as well.
      if (computes_prefix(equations[a], equations[b])) {
        replaced_by[a] = static_cast<int64_t>(b);
        moved[b] = true;
        break;
      }
    }
  }

  ProgramRewrite rewrite(program);
  for (size_t i = 0; i < program.constants.size(); ++i) rewrite.keep_constant(i);
  for (size_t i = 0; i < equations.size(); ++i) {
    if (moved[i]) continue;  // already copied where the scan it replaces stood
    if (replaced_by[i] < 0) {
      rewrite.copy_equation(equations[i]);
      continue;
    }
    // Same operands, so the wider scan can run here; its leading results stand for these.
    const Equation& wide = equations[static_cast<size_t>(replaced_by[i])];
    rewrite.copy_equation(wide);
    for (size_t k = 0; k < equations[i].outputs.size(); ++k) {
      rewrite.map(equations[i].outputs[k], rewrite[wide.outputs[k]]);
    }
  }
  return rewrite.finish();
}

}  // namespace kiln
