// Loading and running an artifact (artifact.h).
#include "artifact/artifact.h"

#include <algorithm>
#include <functional>
#include <map>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "io/bounded_read.h"
#include "io/sha256.h"
#include "ir/parser.h"
#include "ir/program.h"
#include "ir/verifier.h"
#include "kiln/error.h"
#include "kiln/jit.h"
#include "kiln/ops.h"
#include "kiln/safetensors.h"
#include "transforms/eval.h"

namespace kiln::artifact {
namespace {

namespace fs = std::filesystem;

// Every file the manifest lists is there with its SHA-256, and nothing the program needs
// is missing from the list.
void check_files(const fs::path& dir, const Manifest& manifest) {
  for (const char* needed : {"program.txt", "weights.safetensors"}) {
    if (!manifest.files.count(needed)) {
      fail(kUnknownSite, fmt::format("{}: the manifest lists no {}",
                                     io::printable_path(dir / "manifest.json"), needed));
    }
  }
  for (const auto& [file, expected] : manifest.files) {
    fs::path path = dir / file;
    std::error_code error;
    if (!fs::is_regular_file(path, error)) {
      fail(kUnknownSite, fmt::format("artifact {}: {} is missing", io::printable_path(dir), file),
           "an artifact is the whole directory `kiln export` wrote; copy all of it");
    }
    if (std::string actual = io::sha256_file(path); actual != expected) {
      fail(kUnknownSite,
           fmt::format("artifact {}: the SHA-256 of {} is {}, the manifest says {}",
                       io::printable_path(dir), file, actual, expected),
           "the file was changed after export; export the run again");
    }
  }
  if (content_hash(manifest.files) != manifest.content_sha256) {
    fail(kUnknownSite,
         fmt::format("artifact {}: the manifest's content_sha256 does not match "
                     "its files' hashes",
                     io::printable_path(dir)),
         "the manifest was edited; export the run again");
  }
}

Shape shape_of(const std::vector<int64_t>& dims) {
  return Shape{std::span<const int64_t>(dims)};
}

// The shape `stat` ([1], or one value per element of a record) takes to broadcast against
// inputs of shape `input`: all ones, or the record's elements in the example's shape.
Dims broadcastable(const Array& stat, const Dims& input) {
  Dims shape = input;
  shape[0] = 1;
  if (stat.size() == 1) std::fill(shape.begin(), shape.end(), 1);
  return shape;
}

}  // namespace

struct Artifact::Compiled {
  std::shared_ptr<Program> program;
  std::vector<Array> weights;  // the program's inputs but the last
  Array scale, offset;         // f32, [1] or the per-example shape
  // The program compiled once, for batches of the signature's size.
  std::function<std::vector<Array>(const std::vector<Array>&)> run_batch;
};

std::string content_hash(const std::map<std::string, std::string>& file_hashes) {
  std::string lines;
  for (const auto& [file, sha] : file_hashes) {
    if (file != kModelCard) lines += file + " " + sha + "\n";
  }
  return io::sha256_hex(lines);
}

Artifact Artifact::load(const fs::path& dir) {
  fs::path manifest_path = dir / "manifest.json";
  std::optional<std::string> text =
      io::read_regular_file_if_present(manifest_path, io::kMaxRecordBytes);
  if (!text) {
    fail(kUnknownSite,
         fmt::format("{} is not an artifact: it has no manifest.json", io::printable_path(dir)),
         "give a directory `kiln export` wrote: artifacts/<name>/<version>");
  }
  Artifact artifact;
  artifact.manifest_ = parse_manifest(*text, io::printable_path(manifest_path));
  const Manifest& m = artifact.manifest_;
  check_files(dir, m);
  auto compiled = std::make_shared<Compiled>();
  compiled->program = std::make_shared<Program>(
      parse_program(io::read_regular_file(dir / "program.txt", io::kMaxRecordBytes)));
  std::map<std::string, Array> tensors;
  for (auto& [name, array] : load_safetensors(dir / "weights.safetensors").arrays) {
    tensors.emplace(name, array);
  }
  auto tensor = [&](const std::string& name) {
    auto found = tensors.find(name);
    if (found == tensors.end()) {
      fail(kUnknownSite, fmt::format("artifact {}: weights.safetensors has no tensor '{}'",
                                     io::printable_path(dir), name));
    }
    return found->second;
  };
  Program& program = *compiled->program;
  size_t next_constant = 0;
  for (Array& value : program.constant_values) {
    if (!value.defined()) value = tensor(fmt::format("constants/{}", next_constant++));
  }
  verify(program);
  if (m.program_inputs.empty() || m.program_inputs.back() != "input" ||
      m.program_inputs.size() != program.inputs.size()) {
    fail(kUnknownSite,
         fmt::format("artifact {}: the manifest names {} program inputs, the "
                     "program takes {}",
                     io::printable_path(dir), m.program_inputs.size(), program.inputs.size()));
  }
  for (size_t i = 0; i + 1 < m.program_inputs.size(); ++i) {
    compiled->weights.push_back(tensor(m.program_inputs[i]));
  }
  compiled->scale = tensor("preprocess/scale");
  compiled->offset = tensor("preprocess/offset");
  std::shared_ptr<const Program> program_ptr = compiled->program;
  compiled->run_batch = jit(
      [program_ptr](const std::vector<Array>& inputs) {
        return eval_program(*program_ptr, inputs, CallSite());
      },
      JitOptions().named("artifact_predict"));
  artifact.compiled_ = std::move(compiled);
  return artifact;
}

Array Artifact::run(const Array& x) const {
  const TensorSignature& in = manifest_.input;
  const int64_t batch = in.shape.at(0);
  std::vector<int64_t> example(in.shape.begin() + 1, in.shape.end());
  Dims given = x.shape().dims();
  if (x.dtype() != in.dtype || given.size() != in.shape.size() ||
      !std::equal(example.begin(), example.end(), given.begin() + 1)) {
    fail(kUnknownSite,
         fmt::format("model {} {}: the input is {}, it takes {}[n,{}] (any number n of rows)",
                     manifest_.name, manifest_.version, x.aval().to_string(), dtype_name(in.dtype),
                     fmt::join(example, ",")));
  }
  const Compiled& compiled = *compiled_;
  const int64_t rows = x.dim(0);
  std::vector<Array> outputs;
  for (int64_t start = 0; start < rows; start += batch) {
    int64_t count = std::min(batch, rows - start);
    Dims begin(given.size(), 0), end = given;
    begin[0] = start;
    end[0] = start + count;
    Array block = slice(x, begin, end);
    if (count < batch) {  // the last rows, padded with zeros to a whole batch
      Dims pad = given;
      pad[0] = batch - count;
      block = concatenate({block, zeros(Shape(pad), in.dtype)}, 0);
    }
    std::vector<Array> inputs = compiled.weights;
    inputs.push_back(block);
    Array y = compiled.run_batch(inputs).at(0);
    if (count < batch) {
      Dims out_begin(static_cast<size_t>(y.rank()), 0);
      Dims out_end = y.shape().dims();
      out_end[0] = count;
      y = slice(y, out_begin, out_end);
    }
    outputs.push_back(y);
  }
  if (outputs.empty()) {
    std::vector<int64_t> out = manifest_.output.shape;
    out[0] = 0;
    return zeros(shape_of(out), manifest_.output.dtype);
  }
  return outputs.size() == 1 ? outputs[0] : concatenate(outputs, 0);
}

Array Artifact::predict(const Array& raw) const {
  const Manifest& m = manifest_;
  Dims given = raw.shape().dims();
  bool records = given.size() == m.raw_shape.size() + 1 &&
                 std::equal(m.raw_shape.begin(), m.raw_shape.end(), given.begin() + 1);
  if (raw.dtype() != m.raw_dtype || !records) {
    fail(kUnknownSite,
         fmt::format("model {} {}: the records are {}, the training data's were {}[n,{}]", m.name,
                     m.version, raw.aval().to_string(), dtype_name(m.raw_dtype),
                     fmt::join(m.raw_shape, ",")),
         "give records as the training data holds them (or preprocessed inputs to run())");
  }
  if (m.input.dtype != DType::f32) return run(raw);  // token ids: no preprocessing
  // As the training data: value * scale + offset in f32, in the model's input shape (an
  // image gains its channel axis).
  const Compiled& c = *compiled_;
  Dims input = shape_of(m.input.shape).dims();
  input[0] = raw.dim(0);
  Array x = reshape(raw.astype(DType::f32), Shape(input));
  return run(x * reshape(c.scale, Shape(broadcastable(c.scale, input))) +
             reshape(c.offset, Shape(broadcastable(c.offset, input))));
}

}  // namespace kiln::artifact
