// How commands print what they produce.
#pragma once

#include <string_view>

namespace kiln::cli {

// Prints a command's result to stdout (a report, a listing, JSON). Unlike
// train::print_best_effort, which serves a run's progress and summary, a failed write
// counts: finish_output reports it, and main() turns it into a failed command, so that a
// full disk does not pass for an empty result.
void print_result(std::string_view text);

// Flushes stdout; 0 when everything written to it arrived, else the errno of the first
// failure (EPIPE: the reader closed the pipe, as `kiln runs list | head -1` does).
int finish_output();

}  // namespace kiln::cli
