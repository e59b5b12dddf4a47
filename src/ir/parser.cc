// Parsing program text (see parser.h): a recursive-descent reader over the lexer's tokens.
// Params are read through the generic params walk (read_param_field), the parser
// supplying each value; literals and equation comments are in parser_atoms.cc.
#include "ir/parser.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/check.h"
#include "ir/lexer.h"
#include "ir/parser_atoms.h"
#include "ir/printer.h"
#include "prims/bind.h"
#include "prims/params_walk.h"

namespace kiln {
namespace {

using ir::fail_at;
using ir::Token;
using ir::TokenKind;

struct Binding {
  VarId var;
  const Token* name;  // where it was defined
};

// A result declared on the left of an equation.
struct Declared {
  const Token* name;
  const Token* type;
  AbstractValue aval;
};

class Parser final : public ParamValueReader {
 public:
  // A nested program (a control-flow sub-program) is read by a parser of its own over the
  // same tokens: it has its own variables, since sub-programs are closed.
  Parser(const ir::Lexed& lexed, ir::TokenCursor& cursor) : lexed_(lexed), cursor_(cursor) {}

  // The whole text: one program and nothing after it.
  Program parse() {
    Program program = parse_braced();
    if (cursor_.peek().kind != TokenKind::kEnd) {
      cursor_.fail_found("expected the end of the text after '}'");
    }
    return program;
  }

  // '{' lambda ... '}'
  Program parse_braced() {
    cursor_.expect("{", "to open the program");
    cursor_.expect_word("lambda", "after '{'");
    while (!cursor_.peek().is(";")) {
      if (cursor_.peek().kind != TokenKind::kName) {
        cursor_.fail_found("expected a constant 'name:type' or ';' before the inputs");
      }
      Declared constant = parse_binder();
      VarId var = program_.add_var(constant.aval);
      program_.constants.push_back(var);
      program_.constant_values.emplace_back();  // declared without a value
      define(*constant.name, var);
    }
    cursor_.next();
    while (!cursor_.peek().is(".")) {
      if (cursor_.peek().kind != TokenKind::kName) {
        cursor_.fail_found("expected an input 'name:type' or '.' before 'let'");
      }
      Declared input = parse_binder();
      VarId var = program_.add_var(input.aval);
      program_.inputs.push_back(var);
      define(*input.name, var);
    }
    cursor_.next();
    cursor_.expect_word("let", "after the inputs");
    while (!is_name("in")) parse_equation();
    cursor_.next();
    cursor_.expect("(", "before the outputs");
    while (!cursor_.peek().is(")")) {
      if (!at_atom()) cursor_.fail_found("expected an output (a variable or a literal) or ')'");
      program_.outputs.push_back(parse_atom());
    }
    cursor_.next();
    cursor_.expect("}", "to close the program");
    return std::move(program_);
  }

  // ----- params values (ParamValueReader) -----
  int64_t read_int() override {
    if (cursor_.peek().kind != TokenKind::kNumber) fail_value("an integer");
    return ir::parse_integer(cursor_.next(), value_context());
  }
  bool read_bool() override {
    if (!is_name("true") && !is_name("false")) fail_value("true or false");
    return cursor_.next().text == "true";
  }
  DType read_dtype() override {
    if (!at_dtype()) fail_value("a dtype", kDTypeHint);
    return *dtype_from_name(cursor_.next().text);
  }
  std::optional<DType> read_optional_dtype() override {
    if (is_name("none")) {
      cursor_.next();
      return std::nullopt;
    }
    if (!at_dtype()) fail_value("a dtype or none", kDTypeHint);
    return *dtype_from_name(cursor_.next().text);
  }
  IndexMode read_index_mode() override {
    std::optional<IndexMode> mode;
    if (cursor_.peek().kind == TokenKind::kName) mode = index_mode_from_name(cursor_.peek().text);
    if (!mode) fail_value("an index mode (error, clip or fill)");
    cursor_.next();
    return *mode;
  }
  Dims read_dims() override {
    if (!cursor_.peek().is("(")) fail_value("a tuple of integers like (0,1) or ()");
    cursor_.next();
    Dims dims;
    while (!cursor_.peek().is(")")) {
      if (!dims.empty()) {
        cursor_.expect(",", fmt::format("between the integers of {}", value_context()));
      }
      if (cursor_.peek().kind != TokenKind::kNumber) {
        fail_value(dims.empty() ? "an integer or ')'" : "an integer");
      }
      dims.push_back(ir::parse_integer(cursor_.next(), value_context()));
    }
    cursor_.next();
    return dims;
  }
  std::string read_string() override {
    if (cursor_.peek().kind != TokenKind::kString) fail_value("a quoted string like \"name\"");
    return std::string(cursor_.next().text);
  }
  ProgramRef read_program() override {
    if (!cursor_.peek().is("{")) fail_value("a program '{ lambda ... }'");
    Parser nested(lexed_, cursor_);
    return ProgramRef{std::make_shared<const Program>(nested.parse_braced())};
  }
  std::vector<ProgramRef> read_programs() override {
    if (!cursor_.peek().is("(")) fail_value("a list of programs like ({ lambda ... }, ...)");
    cursor_.next();
    std::vector<ProgramRef> programs;
    while (!cursor_.peek().is(")")) {
      if (!programs.empty()) {
        cursor_.expect(",", fmt::format("between the programs of {}", value_context()));
      }
      programs.push_back(read_program());
    }
    cursor_.next();
    return programs;
  }

 private:
  static constexpr const char* kDTypeHint =
      "dtypes are bool, u8, i32, i64, u32, f16, bf16, f32, f64";

  bool is_name(std::string_view word) const {
    return cursor_.peek().kind == TokenKind::kName && cursor_.peek().text == word;
  }
  bool at_dtype() const {
    return cursor_.peek().kind == TokenKind::kName && dtype_from_name(cursor_.peek().text);
  }
  std::string value_context() const { return fmt::format("{} of {}", field_, prim_->name); }
  [[noreturn]] void fail_value(std::string_view expected, const std::string& hint = {}) const {
    cursor_.fail_found(fmt::format("expected {} for {}", expected, value_context()), hint);
  }

  // name ':' type
  Declared parse_binder() {
    const Token& name = cursor_.next();
    if (is_reserved_word(name.text)) {
      fail_at(name, fmt::format("'{}' is a reserved word and cannot name a variable", name.text),
              "the reserved words are lambda let in true false none nan inf");
    }
    cursor_.expect(":", fmt::format("and a type after the variable {}", name.text));
    const Token& type = cursor_.peek();
    return Declared{&name, &type, ir::parse_type(cursor_)};
  }

  [[noreturn]] static void fail_defined_twice(const Token& name, const Token& first) {
    fail_at(name,
            fmt::format("variable '{}' is defined twice (first at {}:{})", name.text, first.line,
                        first.column),
            "every variable is defined once: as a constant, an input or one equation's result");
  }
  void check_new(const Token& name) const {
    auto found = env_.find(name.text);
    if (found != env_.end()) fail_defined_twice(name, *found->second.name);
  }
  void define(const Token& name, VarId var) {
    check_new(name);
    env_.emplace(name.text, Binding{var, &name});
  }

  // A variable or a literal starts here (a name followed by ':' starts the next equation).
  bool at_atom() const {
    const Token& token = cursor_.peek();
    if (token.kind == TokenKind::kNumber) return true;
    if (token.kind != TokenKind::kName) return false;
    if (ir::is_literal_word(token.text)) return true;
    return !is_reserved_word(token.text) && !cursor_.peek(1).is(":");
  }

  VarId parse_atom() {
    const Token& token = cursor_.next();
    if (token.kind == TokenKind::kNumber || ir::is_literal_word(token.text)) {
      cursor_.expect(":", fmt::format("and a type after the literal {} (as in {}:f32[])",
                                      token.text, token.text));
      const Token& type = cursor_.peek();
      AbstractValue aval = ir::parse_type(cursor_);
      Array value = ir::make_literal(token, type, aval);
      VarId var = program_.add_var(aval);
      program_.constants.push_back(var);
      program_.constant_values.push_back(std::move(value));
      return var;
    }
    auto found = env_.find(token.text);
    if (found == env_.end()) {
      fail_at(token, fmt::format("undefined variable '{}'", token.text),
              "a variable is used after its definition: as a constant, an input or an earlier "
              "equation's result");
    }
    return found->second.var;
  }

  const PrimDef& parse_primitive() {
    const Token& token = cursor_.peek();
    if (token.kind != TokenKind::kName) cursor_.fail_found("expected a primitive after '='");
    cursor_.next();
    std::vector<std::string_view> names;
    for (const PrimDef& prim : all_prims()) {
      if (prim.name == token.text) return prim;
      names.push_back(prim.name);
    }
    fail_at(
        token,
        fmt::format("unknown primitive '{}'{}", token.text, ir::did_you_mean(token.text, names)),
        "the primitives are listed in src/prims/ids/all.def");
  }

  Params parse_params(const PrimDef& prim) {
    Params params = default_params(prim.params_index);
    std::vector<std::string_view> fields = param_field_names(prim.params_index);
    if (fields.empty()) {
      if (cursor_.peek().is("["))
        fail_at(cursor_.peek(), fmt::format("{} takes no params", prim.name));
      return params;
    }
    if (!cursor_.peek().is("[")) {
      cursor_.fail_found(fmt::format("expected '[' and the params of {} ({}=...)", prim.name,
                                     fmt::join(fields, "=... ")));
    }
    cursor_.next();
    std::vector<bool> seen(fields.size(), false);
    prim_ = &prim;
    while (!cursor_.peek().is("]")) {
      if (cursor_.peek().kind != TokenKind::kName || !cursor_.peek(1).is("=")) {
        cursor_.fail_found(fmt::format("expected ']' after the params of {}", prim.name));
      }
      const Token& name = cursor_.next();
      cursor_.next();  // '='
      auto index =
          static_cast<size_t>(std::find(fields.begin(), fields.end(), name.text) - fields.begin());
      if (index == fields.size()) {
        fail_at(name,
                fmt::format("{} has no param '{}'{}", prim.name, name.text,
                            ir::did_you_mean(name.text, fields)),
                fmt::format("the params of {} are {}", prim.name, fmt::join(fields, " ")));
      }
      if (seen[index])
        fail_at(name, fmt::format("param {} of {} is given twice", name.text, prim.name));
      seen[index] = true;
      field_ = name.text;
      KILN_CHECK(read_param_field(params, name.text, *this), "param {} not read", name.text);
    }
    std::vector<std::string_view> missing;
    for (size_t i = 0; i < fields.size(); ++i) {
      if (!seen[i]) missing.push_back(fields[i]);
    }
    if (!missing.empty()) {
      fail_at(cursor_.peek(),
              fmt::format("the params of {} lack {}", prim.name, fmt::join(missing, ", ")),
              "every param is written out, even at its default value");
    }
    cursor_.next();
    return params;
  }

  void parse_equation() {
    if (cursor_.peek().kind != TokenKind::kName) {
      cursor_.fail_found("expected an equation 'name:type = primitive ...' or 'in'");
    }
    std::vector<Declared> results;
    do {
      if (!results.empty() &&
          (cursor_.peek().kind != TokenKind::kName || !cursor_.peek(1).is(":"))) {
        cursor_.fail_found(
            fmt::format("expected '=' or another result after {}", results.back().name->text));
      }
      check_new(cursor_.peek());
      for (const Declared& earlier : results) {
        if (earlier.name->text == cursor_.peek().text) {
          fail_defined_twice(cursor_.peek(), *earlier.name);
        }
      }
      results.push_back(parse_binder());
    } while (!cursor_.peek().is("="));
    cursor_.next();
    const Token& prim_token = cursor_.peek();
    const PrimDef& prim = parse_primitive();
    Equation equation;
    equation.prim = prim.id;
    equation.params = parse_params(prim);
    while (at_atom()) equation.inputs.push_back(parse_atom());
    // A comment right after the equation (nothing else between) holds its scope and site.
    const Token& last = cursor_.previous();
    auto comment = lexed_.comments_by_line.find(last.line);
    if (comment != lexed_.comments_by_line.end() && cursor_.peek().line != last.line) {
      ir::read_equation_comment(comment->second, equation);
    }
    check_result_types(prim, prim_token, equation, results);
    for (const Declared& result : results) {
      VarId var = program_.add_var(result.aval);
      equation.outputs.push_back(var);
      define(*result.name, var);
    }
    program_.equations.push_back(std::move(equation));
  }

  // Runs the primitive's shape rule; its errors and any disagreement with the declared
  // types are reported at the equation.
  void check_result_types(const PrimDef& prim, const Token& prim_token, const Equation& equation,
                          const std::vector<Declared>& results) const {
    std::vector<AbstractValue> in_avals;
    for (VarId var : equation.inputs) in_avals.push_back(program_.aval(var));
    std::vector<AbstractValue> out_avals;
    try {
      out_avals = abstract_eval(prim.id, in_avals, equation.params, equation.site);
    } catch (const Error& error) {
      fail_at(prim_token, error.message(), error.hint());
    }
    if (out_avals.size() != results.size()) {
      fail_at(*results.front().name, fmt::format("{} gives {} result(s), but {} are declared",
                                                 prim.name, out_avals.size(), results.size()));
    }
    for (size_t i = 0; i < results.size(); ++i) {
      if (results[i].aval != out_avals[i]) {
        fail_at(*results[i].type,
                fmt::format("{} is declared {}, but {} gives {}", results[i].name->text,
                            results[i].aval.to_string(), prim.name, out_avals[i].to_string()),
                "a result's declared type must be what the primitive's shape rule gives");
      }
    }
  }

  const ir::Lexed& lexed_;
  ir::TokenCursor& cursor_;
  Program program_;
  std::map<std::string_view, Binding> env_;
  const PrimDef* prim_ = nullptr;  // the primitive and param whose value is being read
  std::string_view field_;
};

}  // namespace

Program parse_program(std::string_view text) {
  ir::Lexed lexed = ir::lex(text);
  ir::TokenCursor cursor(lexed.tokens);
  return Parser(lexed, cursor).parse();
}

}  // namespace kiln
