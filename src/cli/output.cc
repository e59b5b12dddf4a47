#include "cli/output.h"

#include <cerrno>
#include <cstdio>

namespace kiln::cli {
namespace {

int first_error = 0;  // commands print from the main thread only

void remember(int error) {
  if (first_error == 0) first_error = error != 0 ? error : EIO;
}

}  // namespace

void print_result(std::string_view text) {
  errno = 0;
  if (std::fwrite(text.data(), 1, text.size(), stdout) < text.size()) remember(errno);
}

int finish_output() {
  errno = 0;
  if (std::fflush(stdout) != 0) remember(errno);
  if (std::ferror(stdout)) remember(errno);
  std::clearerr(stdout);
  return first_error;
}

}  // namespace kiln::cli
