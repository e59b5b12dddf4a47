// The `kiln` command.
#include <cstdio>

int main() {
  return 0;
}
