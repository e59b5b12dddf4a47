// `kiln export`: a completed run as a versioned model artifact (artifact.h, docs/artifacts.md).
//
// The inference program is traced from the run's model in evaluation mode (dropout off,
// batch norm on its running statistics) with the params and state as inputs, printed as
// kiln's program text; the weights, any array constants the program captured and the
// preprocessing go to weights.safetensors; manifest.json records the signature, each
// file's SHA-256 and where the model came from. Before the artifact is moved into place it
// is loaded back alone and run on the run's whole evaluation set: its outputs must equal the
// trainer's evaluation outputs bit for bit, or the export fails and writes nothing.
//
// The version is "<major>.<minor>.<patch>+<first 12 hex of the content hash>": the first
// export of a name is 1.0.0; a later one with the same signature bumps the minor version,
// one with another signature the major. Exporting content that is already there writes
// nothing and says so; an artifact directory is never overwritten, and it appears whole
// (written beside it, then renamed).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace kiln::artifact {

struct ExportOptions {
  std::string name;  // empty: the run's experiment name
  std::filesystem::path artifacts_dir = "artifacts";
  // Export the weights of this savepoint of the run (which need not have completed)
  // instead of its final weights.
  std::optional<int64_t> checkpoint;
  // Also write model.onnx, the inference program translated to ONNX (onnx_export.h); it is
  // one of the model's files, so it is hashed and part of the content that names the version.
  bool onnx = false;
};

struct ExportResult {
  std::filesystem::path dir;  // artifacts/<name>/<version>
  std::string version;
  bool already_exported = false;  // the same content was there: nothing was written
  int64_t parity_examples = 0;    // evaluation examples whose outputs matched bit for bit
};

ExportResult export_run(const std::filesystem::path& run_dir, const ExportOptions& options);

}  // namespace kiln::artifact
