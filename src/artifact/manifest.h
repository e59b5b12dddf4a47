// manifest.json's codec (the Manifest type is public: kiln/artifact.h).
#pragma once

#include <string>
#include <string_view>

#include "kiln/artifact.h"

namespace kiln::artifact {

// manifest.json's text (pretty, keys sorted) and back; parse errors name `where` and the
// field.
std::string manifest_text(const Manifest& manifest);
Manifest parse_manifest(std::string_view text, const std::string& where);

}  // namespace kiln::artifact
