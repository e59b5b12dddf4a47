// kiln's version. CMakeLists.txt refuses to configure when project(kiln VERSION ...) says
// otherwise, so the two cannot drift apart.
#pragma once

namespace kiln {

inline constexpr const char* kVersion = "0.1.0";

}  // namespace kiln
