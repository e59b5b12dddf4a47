// The program verifier (see verifier.h). Variable numbers and primitive ids are checked
// first, so that the program can then be printed to show the offending equation (line
// i + 1 of the text is equation i).
#include "ir/verifier.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ir/printer.h"
#include "prims/bind.h"
#include "prims/params_walk.h"

namespace kiln {
namespace {

std::string describe_params_kind(size_t params_index) {
  std::vector<std::string_view> fields = param_field_names(params_index);
  return fields.empty() ? "no params" : fmt::format("params ({})", fmt::join(fields, " "));
}

class Verifier {
 public:
  explicit Verifier(const Program& program) : program_(program) {}

  void run() {
    check_numbering();
    defined_by_.assign(program_.num_vars(), kUndefined);
    if (program_.constant_values.size() > program_.constants.size()) {
      fail_program(fmt::format("{} constant values for {} constants",
                               program_.constant_values.size(), program_.constants.size()));
    }
    for (size_t i = 0; i < program_.constants.size(); ++i) {
      VarId var = program_.constants[i];
      define_in_header(var, fmt::format("constant {}", i));
      const Array* value =
          i < program_.constant_values.size() ? &program_.constant_values[i] : nullptr;
      if (value != nullptr && value->defined() && value->aval() != program_.aval(var)) {
        fail_program(fmt::format("constant {} is declared {} but its value is {}", i,
                                 program_.aval(var).to_string(), value->aval().to_string()));
      }
    }
    for (size_t i = 0; i < program_.inputs.size(); ++i) {
      define_in_header(program_.inputs[i], fmt::format("input {}", i));
    }
    for (size_t i = 0; i < program_.equations.size(); ++i) check_equation(i);
    for (size_t i = 0; i < program_.outputs.size(); ++i) {
      if (defined_by_[static_cast<size_t>(program_.outputs[i])] == kUndefined) {
        fail_program(
            fmt::format("output {} (variable #{}) is never defined", i, program_.outputs[i]));
      }
    }
  }

 private:
  static constexpr int64_t kUndefined = -2;
  static constexpr int64_t kHeader = -1;

  static std::vector<std::string> split_lines(const std::string& text) {
    std::vector<std::string> lines;
    size_t start = 0;
    while (start <= text.size()) {
      size_t end = std::min(text.find('\n', start), text.size());
      lines.push_back(text.substr(start, end - start));
      start = end + 1;
    }
    return lines;
  }

  [[noreturn]] void fail_program(const std::string& message) const {
    fail(kUnknownSite, "verify: " + message,
         "the program was made by kiln or read from text; "
         "whatever made it has a bug");
  }
  [[noreturn]] void fail_equation(size_t index, const std::string& message) const {
    const Equation& equation = program_.equations[index];
    // Printed only now: printing reads the values of literals, which waits for them.
    std::vector<std::string> lines =
        split_lines(print_program(program_, PrintOptions{.show_scopes = true}));
    // Equation i starts the (i+1)-th line indented by exactly four spaces (the lines of
    // nested sub-programs are indented deeper).
    std::string line;
    size_t seen = 0;
    for (const std::string& candidate : lines) {
      if (candidate.size() > 4 && candidate.compare(0, 4, "    ") == 0 && candidate[4] != ' ' &&
          seen++ == index) {
        line = candidate;
        break;
      }
    }
    while (!line.empty() && line.front() == ' ') line.erase(line.begin());
    fail(equation.site, fmt::format("verify: equation {} ({}): {}\n    {}", index,
                                    prim_name(equation.prim), message, line));
  }

  void check_var(VarId var, const std::string& what) const {
    if (var < 0 || static_cast<size_t>(var) >= program_.num_vars()) {
      fail_program(fmt::format("{} is variable #{}, but the program has {} variables", what, var,
                               program_.num_vars()));
    }
  }

  // Variable numbers and primitive ids in range: what printing the program relies on.
  void check_numbering() const {
    for (size_t i = 0; i < program_.constants.size(); ++i) {
      check_var(program_.constants[i], fmt::format("constant {}", i));
    }
    for (size_t i = 0; i < program_.inputs.size(); ++i) {
      check_var(program_.inputs[i], fmt::format("input {}", i));
    }
    for (size_t e = 0; e < program_.equations.size(); ++e) {
      const Equation& equation = program_.equations[e];
      if (!register_all().contains(equation.prim)) {
        fail_program(fmt::format("equation {} has primitive id {}, which names no primitive", e,
                                 static_cast<int>(equation.prim)));
      }
      for (size_t i = 0; i < equation.inputs.size(); ++i) {
        check_var(equation.inputs[i], fmt::format("operand {} of equation {}", i, e));
      }
      for (size_t i = 0; i < equation.outputs.size(); ++i) {
        check_var(equation.outputs[i], fmt::format("result {} of equation {}", i, e));
      }
      // Sub-programs print with their equation, so their numbering is checked now too.
      for_each_sub_program(equation.params, [&](const std::string& label, const ProgramRef& ref) {
        if (!ref.program) fail_program(fmt::format("equation {} has no {} program", e, label));
        try {
          Verifier(*ref.program).check_numbering();
        } catch (const Error& error) {
          fail_program(fmt::format("equation {} ({}): its {} program: {}", e,
                                   prim_name(equation.prim), label, error.message()));
        }
      });
    }
    for (size_t i = 0; i < program_.outputs.size(); ++i) {
      check_var(program_.outputs[i], fmt::format("output {}", i));
    }
  }

  std::string definer(VarId var) const {
    int64_t by = defined_by_[static_cast<size_t>(var)];
    return by == kHeader ? "as a constant or input" : fmt::format("by equation {}", by);
  }

  void define_in_header(VarId var, const std::string& what) {
    if (defined_by_[static_cast<size_t>(var)] != kUndefined) {
      fail_program(fmt::format("{} (variable #{}) is already defined {}", what, var, definer(var)));
    }
    defined_by_[static_cast<size_t>(var)] = kHeader;
  }

  void check_equation(size_t index) {
    const Equation& equation = program_.equations[index];
    const PrimDef& prim = prim_def(equation.prim);
    if (equation.params.index() != prim.params_index) {
      fail_equation(index, fmt::format("has {}, but {} takes {}",
                                       describe_params_kind(equation.params.index()), prim.name,
                                       describe_params_kind(prim.params_index)));
    }
    if (prim.arity >= 0 && equation.inputs.size() != static_cast<size_t>(prim.arity)) {
      fail_equation(index, fmt::format("has {} operand(s), but {} takes {}", equation.inputs.size(),
                                       prim.name, prim.arity));
    }
    std::vector<AbstractValue> in_avals;
    for (size_t i = 0; i < equation.inputs.size(); ++i) {
      VarId var = equation.inputs[i];
      if (defined_by_[static_cast<size_t>(var)] == kUndefined) {
        fail_equation(index, fmt::format("operand {} is used before it is defined", i));
      }
      in_avals.push_back(program_.aval(var));
    }
    std::vector<AbstractValue> out_avals;
    try {
      out_avals = abstract_eval(equation.prim, in_avals, equation.params, equation.site);
    } catch (const Error& error) {
      fail_equation(index, fmt::format("the shape rule rejects it: {}", error.message()));
    }
    // Sub-programs (control flow) are programs too.
    for_each_sub_program(equation.params, [&](const std::string& label, const ProgramRef& ref) {
      try {
        verify(*ref.program);
      } catch (const Error& error) {
        fail_equation(index,
                      fmt::format("its {} program is malformed: {}", label, error.message()));
      }
    });
    if (out_avals.size() != equation.outputs.size()) {
      fail_equation(index, fmt::format("has {} result(s), but {} gives {}", equation.outputs.size(),
                                       prim.name, out_avals.size()));
    }
    for (size_t i = 0; i < out_avals.size(); ++i) {
      VarId var = equation.outputs[i];
      if (program_.aval(var) != out_avals[i]) {
        fail_equation(index, fmt::format("result {} is recorded as {}, but {} gives {}", i,
                                         program_.aval(var).to_string(), prim.name,
                                         out_avals[i].to_string()));
      }
      if (defined_by_[static_cast<size_t>(var)] != kUndefined) {
        fail_equation(index, fmt::format("result {} is already defined {}", i, definer(var)));
      }
      defined_by_[static_cast<size_t>(var)] = static_cast<int64_t>(index);
    }
  }

  const Program& program_;
  std::vector<int64_t> defined_by_;  // per variable: kUndefined, kHeader or an equation
};

}  // namespace

void verify(const Program& program) {
  Verifier(program).run();
}

}  // namespace kiln
