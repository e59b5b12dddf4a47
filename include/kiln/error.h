// Errors kiln reports to its users. A kiln::Error carries what went wrong (naming the
// primitive, file or field and the shapes/dtypes involved), where in the user's code it
// happened, and a HINT line when a common fix exists. (Internal invariants are KILN_CHECK,
// in src/base/check.h: not part of the API.)
#pragma once

#include <source_location>
#include <stdexcept>
#include <string>

namespace kiln {

// A user-code location, printed as "file:line". Public ops take one as a defaulted last
// argument so that errors, including those raised later by asynchronous kernels, point at
// the line that called the op rather than at kiln's internals.
class CallSite {
 public:
  constexpr CallSite(std::source_location where = std::source_location::current()) noexcept
      : file_(where.file_name()), line_(where.line()) {}
  constexpr CallSite(const char* file, unsigned line) noexcept : file_(file), line_(line) {}
  const char* file() const { return file_; }
  unsigned line() const { return line_; }
  bool known() const { return line_ != 0; }
  std::string to_string() const;

 private:
  const char* file_;
  unsigned line_;
};

inline constexpr CallSite kUnknownSite{"<unknown>", 0};

class Error : public std::runtime_error {
 public:
  Error(std::string message, std::string hint = {}, CallSite site = kUnknownSite);
  const std::string& message() const { return message_; }
  const std::string& hint() const { return hint_; }
  const CallSite& site() const { return site_; }

 private:
  std::string message_;
  std::string hint_;
  CallSite site_;
};

// Raises a user-facing error. `hint` may be empty.
[[noreturn]] void fail(CallSite site, std::string message, std::string hint = {});

}  // namespace kiln
