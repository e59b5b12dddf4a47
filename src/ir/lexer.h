// Tokens of program text (docs/ir.md), for ir/parser. The lexer splits the whole text up
// front: names, numbers, punctuation, and comments (kept apart, by line, because a
// comment after an equation carries its scope and site). Every token knows its line and
// column, so each parse error can say where it is.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::ir {

enum class TokenKind : uint8_t {
  kName,    // [A-Za-z_][A-Za-z0-9_]*: variables, primitives, dtypes, fields, keywords
  kNumber,  // -?digits[.digits][e[+-]digits], and "-inf" / "-nan"
  kPunct,   // one of { } ( ) [ ] : ; . = ~ ,
  kString,  // "text" on one line, without escapes; `text` is what lies between the quotes
  kEnd,
};

struct Token {
  TokenKind kind = TokenKind::kEnd;
  std::string_view text;  // a view into the program text
  int line = 1;
  int column = 1;

  bool is(std::string_view punct_or_word) const {
    return kind != TokenKind::kEnd && text == punct_or_word;
  }
  // How an error quotes the token: 'text', or "end of text".
  std::string describe() const;
};

struct Comment {
  std::string_view text;  // after the '#', to the end of the line
  int line = 1;
  int column = 1;  // of the first character after the '#'
};

struct Lexed {
  std::vector<Token> tokens;  // ends with one kEnd token
  std::map<int, Comment> comments_by_line;
};

// Splits `text`; raises a positioned error on a character no token starts with.
Lexed lex(std::string_view text);

// A read position in a token list (which ends with kEnd).
class TokenCursor {
 public:
  explicit TokenCursor(const std::vector<Token>& tokens) : tokens_(&tokens) {}
  const Token& peek(size_t ahead = 0) const;
  // Consumes and returns the current token (kEnd stays put).
  const Token& next();
  // The last token consumed.
  const Token& previous() const;
  // "program text L:C: <expected>, found 'x'" at the current token.
  [[noreturn]] void fail_found(const std::string& expected, const std::string& hint = {}) const;
  // Consumes punctuation `punct`, or fails with "expected '<punct>' <where>, found ...".
  const Token& expect(std::string_view punct, const std::string& where);
  // Consumes the name `word`, or fails likewise.
  const Token& expect_word(std::string_view word, const std::string& where);

 private:
  const std::vector<Token>* tokens_;
  size_t pos_ = 0;
};

// Raises the kiln::Error "program text LINE:COLUMN: message".
[[noreturn]] void fail_at(int line, int column, const std::string& message,
                          const std::string& hint = {});
[[noreturn]] inline void fail_at(const Token& token, const std::string& message,
                                 const std::string& hint = {}) {
  fail_at(token.line, token.column, message, hint);
}

}  // namespace kiln::ir
