// Transformations of ordinary C++ functions: tracing into programs, reverse- and
// forward-mode differentiation, in the spirit of JAX. A function may take and return Arrays, Trees,
// std::vectors of Arrays and pairs/tuples of these ("pytrees"); any other argument is
// static: it is passed through unchanged and is part of what was traced.
//
//   auto loss = [](const kiln::Array& w, const kiln::Array& x) { return kiln::sum(w * x); };
//   kiln::Array dw = kiln::grad(loss)(w, x);                  // d loss / d w
//   auto [value, dw2] = kiln::value_and_grad(loss)(w, x);
//   std::cout << kiln::make_program(loss, w, x);              // prints the traced program
#pragma once

#include "kiln/custom_vjp.h"
#include "kiln/grad.h"
#include "kiln/jacobian.h"
#include "kiln/jvp.h"
#include "kiln/tracing.h"
