// What the cost rules of every family share (see kiln/cost_types.h for what is counted):
// sizes of types and the two cost shapes most primitives have. Each family's rules sit
// beside its shape rules (prims/<family>_rules.cc); elementwise and aliasing primitives
// get theirs from their flags (cost_rules.cc).
#pragma once

#include <span>

#include "kiln/cost_types.h"
#include "kiln/shape.h"
#include "prims/params.h"

namespace kiln::cost {

inline double elements(const AbstractValue& aval) {
  return static_cast<double>(aval.num_elements());
}
inline double bytes(const AbstractValue& aval) {
  return static_cast<double>(aval.size_bytes());
}
inline double total_bytes(std::span<const AbstractValue> avals) {
  double sum = 0;
  for (const AbstractValue& aval : avals) sum += bytes(aval);
  return sum;
}

// Reads every operand whole (a broadcast operand counts its own size, not the result's:
// it is read once and reused) and writes every result.
inline Cost moves_all(std::span<const AbstractValue> inputs, std::span<const AbstractValue> outputs,
                      double flops = 0) {
  return Cost{.flops = flops,
              .transcendentals = 0,
              .bytes_read = total_bytes(inputs),
              .bytes_written = total_bytes(outputs)};
}

// Pure data movement: no FLOPs, every operand read and every result written.
inline Cost movement(std::span<const AbstractValue> inputs, std::span<const AbstractValue> outputs,
                     const Params&) {
  return moves_all(inputs, outputs);
}

}  // namespace kiln::cost
