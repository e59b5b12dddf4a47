// Printing programs (see printer.h).
#include "ir/printer.h"

#include <fmt/format.h>

#include "kiln/transforms.h"
#include "prims/params_walk.h"

namespace kiln {
namespace {

// A rank-0 constant whose value is known prints inline as "value:type".
bool is_literal(const Program& program, size_t constant_index) {
  if (constant_index >= program.constant_values.size()) return false;
  const Array& value = program.constant_values[constant_index];
  return value.defined() && value.rank() == 0 && value.impl()->is_concrete();
}

std::string literal_text(const Array& value) {
  HostArray host = value.to_host();
  std::string number;
  DType dtype = value.dtype();
  if (dtype == DType::bool_) {
    number = host.element<bool>(0) ? "true" : "false";
  } else if (is_floating(dtype)) {
    // The shortest text that reads back to the same value: f64 as a double, the narrower
    // floats as a float (which holds each of their values exactly), so 0.1:f32[] stays
    // readable.
    number = dtype == DType::f64 ? fmt::format("{}", host.element<double>(0))
                                 : fmt::format("{}", host.element<float>(0));
    if (number.find_first_of(".eEn") == std::string::npos) number += ".0";  // 2 -> 2.0
  } else if (is_unsigned(dtype)) {
    number = fmt::format("{}", host.element<uint64_t>(0));
  } else {
    number = fmt::format("{}", host.element<int64_t>(0));
  }
  return number + ":" + value.aval().to_string();
}

// Plain scopes print as they are; anything the comment syntax could misread (the site
// marker '@', a leading quote or space, control characters) goes in quotes.
bool is_plain_scope(std::string_view scope) {
  if (scope.empty() || scope.front() == ' ' || scope.back() == ' ') return false;
  for (char c : scope) {
    auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f || c == '@' || c == '"' || c == '\\') return false;
  }
  return true;
}

// The options of the program being printed on this thread, which its nested sub-programs
// (control-flow params, printed through the generic params walk) print with too.
thread_local const PrintOptions* nested_options = nullptr;

class NestedOptionsScope {
 public:
  explicit NestedOptionsScope(const PrintOptions* options) : previous_(nested_options) {
    nested_options = options;
  }
  ~NestedOptionsScope() { nested_options = previous_; }
  NestedOptionsScope(const NestedOptionsScope&) = delete;
  NestedOptionsScope& operator=(const NestedOptionsScope&) = delete;

 private:
  const PrintOptions* previous_;
};

// Sub-programs compare by their canonical text (no scopes or sites).
std::string canonical_text(const ProgramRef& ref) {
  NestedOptionsScope plain(nullptr);
  return format_sub_program(ref);
}

constexpr std::string_view kReservedWords[] = {"lambda", "let",  "in",  "true",
                                               "false",  "none", "nan", "inf"};

}  // namespace

std::string var_name(int64_t index) {
  std::string name;
  do {
    name.insert(name.begin(), static_cast<char>('a' + index % 26));
    index /= 26;
  } while (index > 0);
  return name;
}

bool is_reserved_word(std::string_view word) {
  for (std::string_view reserved : kReservedWords) {
    if (word == reserved) return true;
  }
  return false;
}

std::string scope_text(std::string_view scope) {
  if (is_plain_scope(scope)) return std::string(scope);
  std::string text = "\"";
  for (char c : scope) {
    auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      text += '\\';
      text += c;
    } else if (c == '\n') {
      text += "\\n";
    } else if (c == '\t') {
      text += "\\t";
    } else if (byte < 0x20 || byte == 0x7f) {
      text += fmt::format("\\x{:02x}", byte);
    } else {
      text += c;
    }
  }
  return text + "\"";
}

std::string print_program(const Program& program, const PrintOptions& options) {
  NestedOptionsScope nested(&options);
  std::vector<std::string> names(program.num_vars());
  int64_t next = 0;
  auto bind_name = [&](VarId var) -> const std::string& {
    std::string& name = names[static_cast<size_t>(var)];
    if (name.empty()) {
      do {
        name = var_name(next++);
      } while (is_reserved_word(name));
    }
    return name;
  };
  auto typed = [&](VarId var) { return bind_name(var) + ":" + program.aval(var).to_string(); };

  std::string constants, inputs;
  for (size_t i = 0; i < program.constants.size(); ++i) {
    VarId var = program.constants[i];
    if (is_literal(program, i)) {
      names[static_cast<size_t>(var)] = literal_text(program.constant_values[i]);
    } else {
      constants += typed(var) + " ";
    }
  }
  for (VarId var : program.inputs) inputs += " " + typed(var);
  // "{ lambda ; . let" when there are no inputs, as a jaxpr prints.
  std::string text =
      fmt::format("{{ lambda {};{}. let\n", constants, inputs.empty() ? " " : inputs);
  for (const Equation& equation : program.equations) {
    std::vector<std::string> outs, ins;
    for (VarId var : equation.outputs) outs.push_back(typed(var));
    for (VarId var : equation.inputs) ins.push_back(bind_name(var));
    std::string params = format_params(equation.params);
    std::string line =
        fmt::format("    {} = {}{} {}", fmt::join(outs, " "), prim_name(equation.prim),
                    params.empty() ? "" : "[" + params + "]", fmt::join(ins, " "));
    while (!line.empty() && line.back() == ' ') line.pop_back();
    // A nested program's lines continue the equation, one level deeper.
    for (size_t at = line.find('\n'); at != std::string::npos; at = line.find('\n', at + 1)) {
      line.insert(at + 1, "    ");
    }
    std::string note;
    if (options.show_scopes && !equation.scope.empty()) note = scope_text(equation.scope);
    if (options.show_sites && equation.site.known()) {
      note += (note.empty() ? "@ " : " @ ") + equation.site.to_string();
    }
    if (!note.empty()) line += "  # " + note;
    text += line + "\n";
  }
  std::vector<std::string> outs;
  for (VarId var : program.outputs) outs.push_back(bind_name(var));
  text += fmt::format("  in ({}) }}", fmt::join(outs, " "));
  return text;
}

std::string format_sub_program(const ProgramRef& ref) {
  static const Program kEmpty;
  const Program& program = ref.program ? *ref.program : kEmpty;
  return print_program(program, nested_options != nullptr ? *nested_options : PrintOptions{});
}

bool operator==(const ProgramRef& a, const ProgramRef& b) {
  return a.program == b.program || canonical_text(a) == canonical_text(b);
}

std::strong_ordering operator<=>(const ProgramRef& a, const ProgramRef& b) {
  if (a.program == b.program) return std::strong_ordering::equal;
  return canonical_text(a) <=> canonical_text(b);
}

std::ostream& operator<<(std::ostream& out, const Program& program) {
  return out << print_program(program);
}

std::string TracedProgram::to_string() const {
  return print_program(*program, PrintOptions{.show_scopes = true});
}

std::ostream& operator<<(std::ostream& out, const TracedProgram& traced) {
  return out << traced.to_string();
}

}  // namespace kiln
