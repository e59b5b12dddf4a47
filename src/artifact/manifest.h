// An artifact's manifest.json, as a type (docs/artifacts.md): what the model takes and
// gives, how raw input becomes what it takes, the SHA-256 of every other file of the
// artifact, and where the model came from (its run, config, data and kiln).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/dtype.h"

namespace kiln::artifact {

// The manifest format this kiln writes and reads; an artifact of a later one is refused.
inline constexpr int64_t kFormatVersion = 1;

struct TensorSignature {
  DType dtype = DType::f32;
  std::vector<int64_t> shape;  // shape[0] is the batch: the program runs batches of it
};

struct Manifest {
  int64_t format_version = kFormatVersion;
  std::string name;
  std::string version;         // "<semantic version>+<first 12 hex of the content hash>"
  std::string content_sha256;  // of the files' hashes, in name order
  TensorSignature input;       // what the program takes (after preprocessing)
  TensorSignature output;
  // Preprocessing of raw input: value * scale + offset in f32, per element (or one of
  // each), as the training data was (data.normalize).
  std::string normalize;
  DType raw_dtype = DType::f32;    // the dtype the training data came in
  std::vector<int64_t> raw_shape;  // one raw record's shape (an image's [28, 28])
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

// manifest.json's text (pretty, keys sorted) and back; parse errors name `where` and the
// field.
std::string manifest_text(const Manifest& manifest);
Manifest parse_manifest(std::string_view text, const std::string& where);

}  // namespace kiln::artifact
