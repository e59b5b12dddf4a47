// expect: a transformed function must return an Array, a Tree
#include <string>

#include "kiln/ops.h"
#include "kiln/transforms.h"

void use(const kiln::Array& x) {
  auto f = [](const kiln::Array& a) { return std::string("not an array") + a.to_string(); };
  (void)kiln::make_program(f, x);
}
