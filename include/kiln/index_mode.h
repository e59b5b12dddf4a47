// How indexing ops treat an index outside [0, size).
#pragma once

#include <cstdint>

namespace kiln {

// kError (the default) raises an error when the kernel runs, so a bad label never turns
// into a silent wrong number; kClip clamps into range; kFill reads zero (gather) or drops
// the update (scatter).
enum class IndexMode : uint8_t { kError, kClip, kFill };

}  // namespace kiln
