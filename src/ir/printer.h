// Program text in the style of a jaxpr:
//   { lambda a:f32[512] ; b:f32[128,784] c:f32[784,512]. let
//       d:f32[128,512] = dot_general[lhs_contracting=(1) ...] b c
//       e:f32[128,512] = add d 2.0:f32~[]
//     in (e) }
// Constants before ';', inputs after; rank-0 concrete constants print inline as literals.
// docs/ir.md gives the grammar; ir/parser.h reads the text back, so print -> parse ->
// print gives the same text.
#pragma once

#include <ostream>
#include <string>
#include <string_view>

#include "ir/program.h"

namespace kiln {

struct PrintOptions {
  bool show_scopes = false;  // append "# mlp/dense1" to equations traced in a named scope
  bool show_sites = false;   // append "# @ file.cc:12" (after the scope, if shown)
};

std::string print_program(const Program& program, const PrintOptions& options = {});
std::ostream& operator<<(std::ostream& out, const Program& program);

// The index-th name of the sequence a, b, ..., z, ba, bb, ...; the printer names variables
// by first appearance and skips the reserved words.
std::string var_name(int64_t index);
// Words of the text format that are never variable names: keywords ("lambda", "let",
// "in") and the literal words ("true", "false", "none", "nan", "inf").
bool is_reserved_word(std::string_view word);
// How an equation's scope appears in a comment: as it is when it is plain text, else as a
// quoted string with C escapes (docs/ir.md gives the rule).
std::string scope_text(std::string_view scope);

}  // namespace kiln
