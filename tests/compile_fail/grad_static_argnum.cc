// expect: grad: an argnum names a static argument
#include "kiln/ops.h"
#include "kiln/transforms.h"

kiln::Array use(const kiln::Array& x) {
  auto f = [](const kiln::Array& a, double scale) { return kiln::sum(a) * scale; };
  return kiln::grad<1>(f)(x, 2.0);
}
