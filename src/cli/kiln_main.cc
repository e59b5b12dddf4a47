// The `kiln` program: kiln's command line with kiln's own layer types (a program of yours
// registers more, then calls the same function: kiln/train.h).
#include "kiln/train.h"

int main(int argc, char** argv) {
  return kiln::train::command_line_main(argc, argv);
}
