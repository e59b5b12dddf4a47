// What the artifact layer shares besides the public kiln/artifact.h: the name of the model
// card and the content hash that names a model's version.
#pragma once

#include <map>
#include <string>

#include "artifact/manifest.h"
#include "kiln/artifact.h"

namespace kiln::artifact {

// The model card: derived from the model, its run and its evaluation, so listed (and
// checked) among the files but not part of the content hash that names the model.
inline constexpr const char* kModelCard = "MODEL_CARD.md";
// The ONNX translation of the program, when exported with --onnx (onnx_export.h).
inline constexpr const char* kOnnxModel = "model.onnx";

// The SHA-256 of an artifact's content: of "<file> <sha256>\n" for each file but the
// manifest and the model card, in name order. Two exports of the same model, config and
// preprocessing have the same hash.
std::string content_hash(const std::map<std::string, std::string>& file_hashes);

}  // namespace kiln::artifact
