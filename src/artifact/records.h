// Records to predict on, read from a file as `kiln predict` takes them: a .npy file, an
// IDX file (plain or .gz, as the MNIST sets come) or, for a model trained on CSV records, a
// CSV file laid out like its training data (the manifest's preprocessing.csv).
#pragma once

#include <filesystem>

#include "data/raw_array.h"
#include "kiln/artifact.h"

namespace kiln::artifact {

// The records of `path` for `model`, chosen by the file's name (.csv, .npy, or "idx" in
// it). The records' dtype and shape are checked when the model predicts on them.
data::RawArray read_records(const std::filesystem::path& path, const Manifest& model);

}  // namespace kiln::artifact
