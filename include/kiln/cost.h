// Cost analysis: the FLOPs, transcendental functions and bytes moved of a traced program,
// per equation and in total, from the cost rule every primitive declares. The counts are
// those of the program as written (one multiply-add = 2 FLOPs, as XLA counts): a static
// model for rooflines and for comparing programs, not a measurement.
//
//   kiln::CostReport report = kiln::cost_analysis(loss, params, x, y);
//   std::cout << report.to_string();        // a table, program order, with totals
//   double gflops = report.total.flops / 1e9;
#pragma once

#include <string>
#include <vector>

#include "kiln/cost_types.h"
#include "kiln/transforms.h"

namespace kiln {

struct EquationCost {
  size_t index = 0;       // the equation's position in the program
  std::string primitive;  // its primitive's name, e.g. "dot_general"
  std::string scope;      // the named_scope it was traced under ("" if none)
  std::string site;       // where it was traced, "file.cc:42" ("" if unknown)
  Cost cost;
};

struct CostReport {
  std::vector<EquationCost> equations;  // in program order
  Cost total;                           // the sum over equations
  // A table, one line per equation in program order, then the total: FLOPs,
  // transcendentals, bytes read and written, and arithmetic intensity (FLOPs per byte).
  std::string to_string() const;
};

// The cost of each equation of a traced program and their total.
CostReport cost_analysis(const TracedProgram& program);

// Traces f(args...) as make_program does and analyses the program.
template <typename F, typename... Args>
CostReport cost_analysis(F f, const Args&... args) {
  return cost_analysis(make_program(std::move(f), args...));
}

}  // namespace kiln
