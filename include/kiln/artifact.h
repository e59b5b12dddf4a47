// Model artifacts, loaded alone for prediction (docs/artifacts.md): a directory
// artifacts/<name>/<version>/ that `kiln export` wrote from a trained run, holding
//   program.txt          the inference program (evaluation mode) in kiln's program text
//   weights.safetensors  the program's inputs but the last (params, state, constants) and
//                        the preprocessing's scale and offset
//   config.toml          the run's resolved config (`kiln train config.toml` trains it again)
//   MODEL_CARD.md        intended use, data, evaluation, limitations
//   manifest.json        the signature, the preprocessing, each file's SHA-256, the source
// Artifact::load checks every file against the manifest before it parses anything, parses
// and verifies the program, and refuses what does not fit (a tampered file, a newer
// format); no run directory and no training code are involved.
//
//   #include <kiln/artifact.h>
//   kiln::Artifact model = kiln::Artifact::load("artifacts/fashion_mnist_mlp/1.0.0+e897e905415b");
//   kiln::Array logits = model.predict(raw_u8_images);   // u8 [n, 28, 28] -> f32 [n, 10]
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/array.h"
#include "kiln/dtype.h"

namespace kiln {
namespace artifact {

// The manifest format this kiln writes and reads; an artifact of a later one is refused.
inline constexpr int64_t kFormatVersion = 1;

struct TensorSignature {
  DType dtype = DType::f32;
  std::vector<int64_t> shape;  // shape[0] is the batch: the program runs batches of it
};

// How the training data's CSV file was laid out, for a model trained on CSV records:
// `kiln predict` reads a CSV file of records the same way.
struct CsvLayout {
  // The feature columns in the model's order: by name, or by position ("0", "1", ...) in a
  // file without a header. Other columns of a file (the label) are ignored.
  std::vector<std::string> feature_columns;
  bool header = true;
  int64_t skip_lines = 0;  // lines before the header or the first record
};

struct Manifest {
  int64_t format_version = kFormatVersion;
  std::string name;
  std::string version;         // "<semantic version>+<first 12 hex of the content hash>"
  std::string content_sha256;  // of the model's files' hashes (not the manifest's or the card's)
  TensorSignature input;       // what the program takes (after preprocessing)
  TensorSignature output;
  // Preprocessing of raw input: value * scale + offset in f32, per element (or one of
  // each), as the training data was (data.normalize).
  std::string normalize;
  DType raw_dtype = DType::f32;    // the dtype the training data came in
  std::vector<int64_t> raw_shape;  // one raw record's shape (an image's [28, 28])
  std::optional<CsvLayout> csv;    // the training data was a CSV file laid out so
  // The program's inputs, in order: the weights file's tensor names ("params/dense_1/kernel",
  // "state/...", "constants/0") and last "input".
  std::vector<std::string> program_inputs;
  std::map<std::string, std::string> files;  // file name -> SHA-256 (hex)
  // Provenance.
  std::string run;  // "<experiment>/<run id>"
  std::string run_dir;
  std::string config_sha256;
  std::string data_sha256;
  std::string params_sha256;               // of the run's final weights ("" for a savepoint's)
  std::optional<int64_t> checkpoint_step;  // exported from this savepoint of the run
  std::string kernels;
  std::string kiln_version;             // that exported it
  std::optional<double> test_accuracy;  // as the run recorded it
  std::string code_commit;              // the git commit kiln was built from ("" unknown)
  bool code_dirty = false;              // with uncommitted changes
  // The artifact's own evaluation at export (MODEL_CARD.md's figures): predictions on the
  // run's test split and how many were right. `kiln verify` measures them again.
  int64_t evaluated = 0;
  int64_t correct = 0;
};

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

}  // namespace artifact

using artifact::Artifact;

}  // namespace kiln
