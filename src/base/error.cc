// Formatting and raising of kiln::Error; see include/kiln/error.h.
#include "kiln/error.h"

#include <cstring>

#include <fmt/format.h>

namespace kiln {
namespace {

// Paths inside this repository are shown relative to it; user paths are shown as given.
const char* short_path(const char* path) {
  for (const char* marker : {"/src/", "/tests/", "/examples/", "/bench/", "/include/"}) {
    if (const char* at = std::strstr(path, marker)) return at + 1;
  }
  return path;
}

std::string render(const std::string& message, const std::string& hint, const CallSite& site) {
  std::string text = message;
  if (site.known()) text += fmt::format("\n  at {}", site.to_string());
  if (!hint.empty()) text += "\nHINT: " + hint;
  return text;
}

}  // namespace

std::string CallSite::to_string() const {
  return fmt::format("{}:{}", short_path(file_), line_);
}

Error::Error(std::string message, std::string hint, CallSite site)
    : std::runtime_error(render(message, hint, site)),
      message_(std::move(message)),
      hint_(std::move(hint)),
      site_(site) {}

void fail(CallSite site, std::string message, std::string hint) {
  throw Error(std::move(message), std::move(hint), site);
}

namespace detail {
void check_failed(const char* condition, const char* file, int line, const std::string& detail) {
  std::string message = fmt::format("kiln internal error: check `{}` failed at {}:{}", condition,
                                    short_path(file), line);
  if (!detail.empty()) message += ": " + detail;
  throw Error(message, "this is a bug in kiln; please report it with the program that raised it");
}
}  // namespace detail

}  // namespace kiln
