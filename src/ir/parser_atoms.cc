// Types, integers, literals, equation comments and suggestions for the program text
// parser (see parser_atoms.h).
#include "ir/parser_atoms.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <limits>
#include <mutex>
#include <set>

#include <fmt/format.h>

#include "base/edit_distance.h"
#include "core/element_convert.h"
#include "core/sharding_spec_checks.h"
#include "kiln/ops.h"

namespace kiln::ir {
namespace {

bool is_integer_text(std::string_view text) {
  if (!text.empty() && text.front() == '-') text.remove_prefix(1);
  return !text.empty() && text.find_first_not_of("0123456789") == std::string_view::npos;
}

// Parsed call sites point at file names that live as long as the process (CallSite keeps
// a plain pointer); each distinct name is stored once.
const char* intern_file_name(std::string_view name) {
  static std::mutex mutex;
  static auto* names = new std::set<std::string, std::less<>>();  // never freed, see above
  std::lock_guard lock(mutex);
  auto found = names->find(name);
  if (found == names->end()) found = names->emplace(name).first;
  return found->c_str();
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// A quoted scope starting at text[0] == '"'; `at` is left just past the closing quote.
std::string read_quoted(std::string_view text, size_t& at, const Comment& comment) {
  auto fail_here = [&](size_t offset, const std::string& message) {
    fail_at(comment.line, comment.column + static_cast<int>(offset), message,
            "a quoted scope uses the escapes \\\" \\\\ \\n \\t \\xHH");
  };
  std::string scope;
  at = 1;
  while (true) {
    if (at >= text.size()) fail_here(at, "unterminated quoted scope: expected '\"'");
    char c = text[at];
    if (c == '"') break;
    if (c != '\\') {
      scope += c;
      ++at;
      continue;
    }
    char escape = at + 1 < text.size() ? text[at + 1] : '\0';
    if (escape == '"' || escape == '\\') {
      scope += escape;
      at += 2;
    } else if (escape == 'n' || escape == 't') {
      scope += escape == 'n' ? '\n' : '\t';
      at += 2;
    } else if (escape == 'x' && at + 3 < text.size() && hex_digit(text[at + 2]) >= 0 &&
               hex_digit(text[at + 3]) >= 0) {
      scope += static_cast<char>(hex_digit(text[at + 2]) * 16 + hex_digit(text[at + 3]));
      at += 4;
    } else {
      fail_here(at, "unknown escape in a quoted scope");
    }
  }
  ++at;
  return scope;
}

}  // namespace

AbstractValue parse_type(TokenCursor& cursor) {
  const Token& name = cursor.peek();
  std::optional<DType> dtype;
  if (name.kind == TokenKind::kName) dtype = dtype_from_name(name.text);
  if (!dtype) {
    cursor.fail_found("expected a dtype (a type is written like f32[128,784])",
                      "dtypes are bool, u8, i32, i64, u32, f16, bf16, f32, f64");
  }
  cursor.next();
  bool weak = false;
  if (cursor.peek().is("~")) {
    cursor.next();
    weak = true;
  }
  cursor.expect("[",
                fmt::format("after the dtype {} (a type is written like f32[128,784])", name.text));
  Shape shape;
  while (!cursor.peek().is("]")) {
    if (shape.rank() > 0) cursor.expect(",", "between the sizes of a shape");
    const Token& size = cursor.peek();
    if (size.kind != TokenKind::kNumber) cursor.fail_found("expected a size or ']' in the shape");
    cursor.next();
    int64_t value = parse_integer(size, "a size");
    if (value < 0) fail_at(size, fmt::format("a size must be >= 0, found {}", value));
    shape.dims().push_back(value);
  }
  cursor.next();
  AbstractValue aval(std::move(shape), *dtype, weak);
  // A '{' right after a type opens its sharding, unless it opens a sub-program.
  if (cursor.peek().is("{") && !cursor.peek(1).is("lambda")) {
    aval.sharding = parse_sharding(cursor, aval);
  }
  return aval;
}

namespace {

const Token& mesh_axis_name(TokenCursor& cursor) {
  const Token& name = cursor.peek();
  if (name.kind != TokenKind::kName || name.text == "_") {
    cursor.fail_found("expected a mesh axis name");
  }
  return cursor.next();
}

}  // namespace

ShardingSpec parse_sharding(TokenCursor& cursor, const AbstractValue& aval) {
  const Token& open = cursor.expect("{", "to open a sharding (as in f32[8,4]{data,_})");
  ShardingSpec spec;
  spec.sharded = true;
  while (!cursor.peek().is("}")) {
    if (!spec.dims.empty()) cursor.expect(",", "between the dimensions of a sharding");
    std::vector<std::string> axes;
    if (cursor.peek().is("(")) {
      cursor.next();
      axes.emplace_back(mesh_axis_name(cursor).text);
      while (!cursor.peek().is(")")) {
        cursor.expect(",", "between the mesh axes that split one dimension");
        axes.emplace_back(mesh_axis_name(cursor).text);
      }
      cursor.next();
    } else if (cursor.peek().kind == TokenKind::kName && cursor.peek().text == "_") {
      cursor.next();
    } else {
      axes.emplace_back(mesh_axis_name(cursor).text);
    }
    spec.dims.push_back(std::move(axes));
  }
  cursor.next();
  if (std::optional<std::string> axis = repeated_axis(spec)) {
    fail_at(open, repeated_axis_message("the sharding", spec, *axis), kRepeatedAxisHint);
  }
  if (static_cast<int64_t>(spec.dims.size()) != aval.shape.rank()) {
    fail_at(open,
            fmt::format("the sharding of {} names {} dimension(s), but the shape has {}",
                        aval.to_string(), spec.dims.size(), aval.shape.rank()),
            "a sharding gives one entry per dimension: a mesh axis, (axes), or _ for none");
  }
  return spec;
}

int64_t parse_integer(const Token& token, std::string_view what) {
  if (!is_integer_text(token.text)) {
    fail_at(token, fmt::format("expected an integer for {}, found {}", what, token.describe()));
  }
  int64_t value = 0;
  auto [end, error] =
      std::from_chars(token.text.data(), token.text.data() + token.text.size(), value);
  if (error != std::errc() || end != token.text.data() + token.text.size()) {
    fail_at(token, fmt::format("the integer {} for {} does not fit in 64 bits", token.text, what));
  }
  return value;
}

bool is_literal_word(std::string_view word) {
  return word == "true" || word == "false" || word == "nan" || word == "inf";
}

Array make_literal(const Token& value, const Token& type, const AbstractValue& aval) {
  if (aval.shape.rank() != 0) {
    fail_at(type,
            fmt::format("a literal is a scalar: its type must have rank 0, like {}[], found {}",
                        dtype_name(aval.dtype), aval.to_string()));
  }
  std::string_view text = value.text;
  bool is_bool_word = text == "true" || text == "false";
  if ((aval.dtype == DType::bool_) != is_bool_word) {
    fail_at(value,
            aval.dtype == DType::bool_
                ? fmt::format("a bool literal is true or false, found {}", value.describe())
                : fmt::format("the literal {} cannot have the type {}", text, aval.to_string()),
            "literals are written like true:bool[], 3:i32[], 2.0:f32[] or nan:f32~[]");
  }
  if (is_integer(aval.dtype) && !is_integer_text(text)) {
    fail_at(value, fmt::format("the literal {} is not an integer, but its type is {}", text,
                               aval.to_string()));
  }
  std::byte bytes[8] = {};
  visit_dtype(aval.dtype, [&](auto tag) {
    using S = storage_t<decltype(tag)::value>;
    S stored{};
    if constexpr (std::is_same_v<S, bool>) {
      stored = text == "true";
    } else if constexpr (std::is_integral_v<S>) {
      int64_t number = parse_integer(value, "a literal");
      // Every integer dtype but i64 has its whole range inside int64's.
      if (!std::is_same_v<S, int64_t> &&
          (number < static_cast<int64_t>(std::numeric_limits<S>::min()) ||
           number > static_cast<int64_t>(std::numeric_limits<S>::max()))) {
        fail_at(value,
                fmt::format("the literal {} is out of range for {}", text, dtype_name(aval.dtype)));
      }
      stored = static_cast<S>(number);
    } else {
      // f64 reads as a double; the narrower floats read as a float, which is how the
      // printer writes them (shortest text for the float value).
      using Read = std::conditional_t<std::is_same_v<S, double>, double, float>;
      Read number{};
      auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), number);
      if (error != std::errc() || end != text.data() + text.size()) {
        fail_at(value,
                fmt::format("the literal {} is out of range for {}", text, dtype_name(aval.dtype)));
      }
      stored = convert_element<S>(number);
    }
    std::memcpy(bytes, &stored, sizeof(S));
  });
  return from_host_bytes(bytes, aval, nullptr, kUnknownSite);
}

void read_equation_comment(const Comment& comment, Equation& equation) {
  std::string_view text = comment.text;
  size_t at = 0;
  while (at < text.size() && text[at] == ' ') ++at;
  if (at < text.size() && text[at] == '"') {
    size_t end = 0;
    equation.scope = read_quoted(
        text.substr(at), end, Comment{text, comment.line, comment.column + static_cast<int>(at)});
    at += end;
    while (at < text.size() && text[at] == ' ') ++at;
    if (at < text.size() && text[at] != '@') {
      fail_at(comment.line, comment.column + static_cast<int>(at),
              "expected '@' and a call site or the end of the line after a quoted scope");
    }
  } else {
    size_t marker = std::min(text.find('@', at), text.size());
    equation.scope = std::string(trim(text.substr(at, marker - at)));
    at = marker;
  }
  if (at >= text.size()) return;
  // '@' file ':' line
  size_t site_start = at + 1;
  while (site_start < text.size() && text[site_start] == ' ') ++site_start;
  std::string_view site = trim(text.substr(site_start));
  size_t colon = site.rfind(':');
  std::string_view file = colon == std::string_view::npos ? "" : site.substr(0, colon);
  std::string_view line = colon == std::string_view::npos ? "" : site.substr(colon + 1);
  unsigned line_number = 0;
  auto [end, error] = std::from_chars(line.data(), line.data() + line.size(), line_number);
  if (file.empty() || line.empty() || error != std::errc() || end != line.data() + line.size() ||
      line_number == 0) {
    fail_at(comment.line, comment.column + static_cast<int>(site_start),
            fmt::format("expected a call site 'file:line' after '@', found '{}'", site),
            "an equation's comment is '# scope @ file.cc:12'; both parts are optional");
  }
  equation.site = CallSite(intern_file_name(file), line_number);
}

std::string did_you_mean(std::string_view word, std::span<const std::string_view> candidates) {
  std::string_view best = closest_match(word, candidates);
  return best.empty() ? std::string() : fmt::format(" (did you mean '{}'?)", best);
}

}  // namespace kiln::ir
