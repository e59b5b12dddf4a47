// Program text: lex -> parse -> verify, as kiln reads a program it did not print. Property:
// a program that parses and verifies prints back to text that parses to a program
// printing identically (docs/ir.md's round-trip promise).
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_support.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  kiln::Program program;
  bool ok = kiln::fuzz::parses([&] {
    program = kiln::parse_program(text);
    kiln::verify(program);
  });
  if (!ok) return 0;
  std::string printed = kiln::print_program(program);
  std::string again;
  bool reparsed =
      kiln::fuzz::parses([&] { again = kiln::print_program(kiln::parse_program(printed)); });
  if (!reparsed) kiln::fuzz::finding("a verified program's printed text does not parse");
  if (again != printed) kiln::fuzz::finding("print -> parse -> print changed the text");
  return 0;
}
