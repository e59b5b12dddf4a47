// The small pieces of program text that ir/parser.cc reads: types, integers, literals,
// the comment after an equation (its scope and call site), and did-you-mean suggestions.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "ir/lexer.h"
#include "ir/program.h"

namespace kiln::ir {

// dtype ['~'] '[' [int {',' int}] ']' [sharding], e.g. f32[128,784], f32~[] or
// f32[128,784]{data,_}.
AbstractValue parse_type(TokenCursor& cursor);

// '{' entry {',' entry} '}' with one entry per dimension of `aval`: a mesh axis name, a
// parenthesized list of them, or '_' for a dimension no axis splits. No axis twice.
ShardingSpec parse_sharding(TokenCursor& cursor, const AbstractValue& aval);

// The integer a number token holds; `what` names the value in errors ("axes of reduce_sum").
int64_t parse_integer(const Token& token, std::string_view what);

// Names that are literal values when a type follows: true, false, nan, inf.
bool is_literal_word(std::string_view word);

// The rank-0 array a literal stands for: `value` (a number or literal word) read as
// `aval`'s dtype. `type` is where the type was written, for errors.
Array make_literal(const Token& value, const Token& type, const AbstractValue& aval);

// Fills equation.scope and equation.site from the comment written after it:
//   '#' [scope | quoted-scope] ['@' file ':' line]
void read_equation_comment(const Comment& comment, Equation& equation);

// " (did you mean 'x'?)" for the closest candidate within a few edits, else "".
std::string did_you_mean(std::string_view word, std::span<const std::string_view> candidates);

}  // namespace kiln::ir
