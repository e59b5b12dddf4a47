// expect: grad: an argnum is out of range
#include "kiln/ops.h"
#include "kiln/transforms.h"

kiln::Array use(const kiln::Array& x) {
  auto f = [](const kiln::Array& a) { return kiln::sum(a); };
  return kiln::grad<1>(f)(x);
}
