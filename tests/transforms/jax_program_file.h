// Reads the cross-check's program file (tests/transforms/jax_programs.kp, whose header
// describes the format): each program's name, its flags and its text. The Python side
// (tests/tools/jax_transforms_check.py) reads the same file with its own reader.
#pragma once

#include <charconv>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace kiln::testing {

struct CrossProgram {
  std::string name;
  std::string text;  // in f32, as written
  int line = 0;      // of its "program" line
  int64_t ints = 0;  // integer inputs are drawn from [0, ints)
  bool nograd = false;
};

// A file that cannot be read, text before the first "program" line, a flag that is not
// known or a name used twice is an error naming the file and line.
inline std::vector<CrossProgram> read_cross_programs(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument(fmt::format("cannot read {}", path));
  std::vector<CrossProgram> programs;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    std::istringstream words(line);
    std::string first;
    words >> first;
    if (first == "program") {
      CrossProgram program{.line = number};
      words >> program.name;
      for (std::string flag; words >> flag;) {
        if (flag == "nograd") {
          program.nograd = true;
        } else if (flag.starts_with("ints=")) {
          const char* end = flag.data() + flag.size();
          auto [rest, status] = std::from_chars(flag.data() + 5, end, program.ints);
          if (status != std::errc() || rest != end || program.ints <= 0) {
            throw std::invalid_argument(fmt::format(
                "{}:{}: {} is not ints=N with N a positive integer", path, number, flag));
          }
        } else {
          throw std::invalid_argument(fmt::format(
              "{}:{}: unknown flag '{}' (expected ints=N or nograd)", path, number, flag));
        }
      }
      for (const CrossProgram& earlier : programs) {
        if (earlier.name == program.name) {
          throw std::invalid_argument(
              fmt::format("{}:{}: program {} is defined twice (first at line {})", path, number,
                          program.name, earlier.line));
        }
      }
      programs.push_back(program);
    } else if (!programs.empty()) {
      programs.back().text += line + "\n";
    } else if (!first.empty() && !first.starts_with("#")) {
      throw std::invalid_argument(
          fmt::format("{}:{}: expected 'program NAME' before program text", path, number));
    }
  }
  return programs;
}

// The program's text with every f32 replaced by `dtype` ("f64" for the f64 run).
inline std::string with_float_dtype(std::string text, const std::string& dtype) {
  for (size_t at = text.find("f32"); at != std::string::npos;
       at = text.find("f32", at + dtype.size())) {
    text.replace(at, 3, dtype);
  }
  return text;
}

}  // namespace kiln::testing
