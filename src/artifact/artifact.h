// A model artifact loaded alone, for prediction (docs/artifacts.md): no run directory, no
// training code. An artifact is a directory artifacts/<name>/<version>/ holding
//   program.txt          the inference program (eval mode) in kiln's program text
//   weights.safetensors  the program's inputs but the last (params, state, constants) and
//                        the preprocessing's scale and offset
//   config.toml          the run's resolved config (`kiln train config.toml` trains it again)
//   MODEL_CARD.md        intended use, data, evaluation, limitations (model_card.h)
//   manifest.json        the signature, the preprocessing, each file's SHA-256, the source
// load() checks every file against the manifest before it parses anything, parses and
// verifies the program, and refuses what does not fit (a tampered file, a newer format).
//
//   kiln::artifact::Artifact model = kiln::artifact::Artifact::load("artifacts/mlp/1.0.0+ab12...");
//   kiln::Array logits = model.predict(raw_u8_images);   // [n, 10]
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "artifact/manifest.h"
#include "kiln/array.h"

namespace kiln::artifact {

class Artifact {
 public:
  static Artifact load(const std::filesystem::path& dir);

  const Manifest& manifest() const { return manifest_; }
  // The model's outputs for inputs already preprocessed: `x` of the input signature's dtype
  // and per-example shape, any number of rows (run in batches of the signature's, the last
  // one padded). A shape or dtype that does not fit is an error saying what is expected.
  Array run(const Array& x) const;
  // Raw records in the training data's dtype (e.g. u8 pixels), preprocessed as the
  // training data was (value * scale + offset in f32), then run.
  Array predict(const Array& raw) const;

 private:
  struct Compiled;
  Manifest manifest_;
  std::shared_ptr<const Compiled> compiled_;
};

// The model card: derived from the model, its run and its evaluation, so listed (and
// checked) among the files but not part of the content hash that names the model.
inline constexpr const char* kModelCard = "MODEL_CARD.md";

// The SHA-256 of an artifact's content: of "<file> <sha256>\n" for each file but the
// manifest and the model card, in name order. Two exports of the same model, config and
// preprocessing have the same hash.
std::string content_hash(const std::map<std::string, std::string>& file_hashes);

}  // namespace kiln::artifact
