// The wall clock as run records store it: Unix time (what run.json, metrics.jsonl,
// TensorBoard and MLflow timestamps are), unlike the steady clock that times steps.
#pragma once

#include <chrono>
#include <cstdint>

namespace kiln {

inline double unix_seconds_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

inline int64_t unix_milliseconds_now() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace kiln
