// Splitting program text into tokens (see lexer.h).
#include "ir/lexer.h"

#include <algorithm>

#include <fmt/format.h>

#include "base/check.h"
#include "kiln/error.h"

namespace kiln::ir {
namespace {

bool is_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_name_char(char c) {
  return is_name_start(c) || is_digit(c);
}

constexpr std::string_view kPunctuation = "{}()[]:;.=~,";

}  // namespace

std::string Token::describe() const {
  if (kind == TokenKind::kEnd) return "end of text";
  if (kind == TokenKind::kString) return fmt::format("'\"{}\"'", text);
  return fmt::format("'{}'", text);
}

void fail_at(int line, int column, const std::string& message, const std::string& hint) {
  fail(kUnknownSite, fmt::format("program text {}:{}: {}", line, column, message), hint);
}

Lexed lex(std::string_view text) {
  Lexed lexed;
  size_t pos = 0;
  int line = 1;
  size_t line_start = 0;
  auto column_of = [&](size_t at) { return static_cast<int>(at - line_start) + 1; };
  auto add = [&](TokenKind kind, size_t begin, size_t end) {
    lexed.tokens.push_back(Token{kind, text.substr(begin, end - begin), line, column_of(begin)});
  };
  auto digits_from = [&](size_t at) {
    while (at < text.size() && is_digit(text[at])) ++at;
    return at;
  };
  while (pos < text.size()) {
    char c = text[pos];
    if (c == '\n') {
      ++pos;
      ++line;
      line_start = pos;
    } else if (c == ' ' || c == '\t' || c == '\r') {
      ++pos;
    } else if (c == '#') {
      size_t end = text.find('\n', pos);
      if (end == std::string_view::npos) end = text.size();
      std::string_view body = text.substr(pos + 1, end - pos - 1);
      if (!body.empty() && body.back() == '\r') body.remove_suffix(1);
      lexed.comments_by_line[line] = Comment{body, line, column_of(pos + 1)};
      pos = end;
    } else if (is_name_start(c)) {
      size_t end = pos;
      while (end < text.size() && is_name_char(text[end])) ++end;
      add(TokenKind::kName, pos, end);
      pos = end;
    } else if (is_digit(c) || (c == '-' && pos + 1 < text.size())) {
      size_t end = pos + (c == '-' ? 1 : 0);
      if (text.substr(end, 3) == "inf" || text.substr(end, 3) == "nan") {
        end += 3;  // "-inf", "-nan" (the unsigned ones are names)
      } else if (!is_digit(text[end])) {
        fail_at(line, column_of(pos), "expected a digit after '-'");
      } else {
        end = digits_from(end);
        if (end + 1 < text.size() && text[end] == '.' && is_digit(text[end + 1])) {
          end = digits_from(end + 1);
        }
        if (end < text.size() && (text[end] == 'e' || text[end] == 'E')) {
          size_t exponent = end + 1;
          if (exponent < text.size() && (text[exponent] == '+' || text[exponent] == '-')) {
            ++exponent;
          }
          if (exponent < text.size() && is_digit(text[exponent])) end = digits_from(exponent);
        }
      }
      if (end < text.size() && is_name_char(text[end])) {
        fail_at(line, column_of(end),
                fmt::format("unexpected '{}' in the number '{}'", text[end],
                            text.substr(pos, end - pos + 1)));
      }
      add(TokenKind::kNumber, pos, end);
      pos = end;
    } else if (c == '"') {
      size_t end = pos + 1;
      while (end < text.size() && text[end] != '"' && text[end] != '\n') ++end;
      if (end == text.size() || text[end] != '"') {
        fail_at(line, column_of(pos), "unterminated string (a closing '\"' on the same line)");
      }
      add(TokenKind::kString, pos + 1, end);
      pos = end + 1;
    } else if (kPunctuation.find(c) != std::string_view::npos) {
      add(TokenKind::kPunct, pos, pos + 1);
      ++pos;
    } else {
      auto byte = static_cast<unsigned char>(c);
      fail_at(line, column_of(pos),
              byte >= 0x20 && byte < 0x7f ? fmt::format("unexpected character '{}'", c)
                                          : fmt::format("unexpected byte 0x{:02x}", byte),
              "program text is what print_program writes; docs/ir.md gives its grammar");
    }
  }
  lexed.tokens.push_back(Token{TokenKind::kEnd, text.substr(text.size()), line, column_of(pos)});
  return lexed;
}

const Token& TokenCursor::peek(size_t ahead) const {
  return (*tokens_)[std::min(pos_ + ahead, tokens_->size() - 1)];
}

const Token& TokenCursor::next() {
  const Token& token = peek();
  if (token.kind != TokenKind::kEnd) ++pos_;
  return token;
}

const Token& TokenCursor::previous() const {
  KILN_CHECK(pos_ > 0, "no token consumed yet");
  return (*tokens_)[pos_ - 1];
}

void TokenCursor::fail_found(const std::string& expected, const std::string& hint) const {
  fail_at(peek(), fmt::format("{}, found {}", expected, peek().describe()), hint);
}

const Token& TokenCursor::expect(std::string_view punct, const std::string& where) {
  if (peek().kind != TokenKind::kPunct || peek().text != punct) {
    fail_found(fmt::format("expected '{}' {}", punct, where));
  }
  return next();
}

const Token& TokenCursor::expect_word(std::string_view word, const std::string& where) {
  if (peek().kind != TokenKind::kName || peek().text != word) {
    fail_found(fmt::format("expected '{}' {}", word, where));
  }
  return next();
}

}  // namespace kiln::ir
