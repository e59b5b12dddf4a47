// manifest.json's codec (manifest.h). Unlike run.json, a manifest is read strictly: an
// artifact is what a service loads, and a field that is missing or of another type means
// a damaged or hand-edited artifact, which is refused by name.
#include "artifact/manifest.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "io/bounded_read.h"
#include "io/json_text.h"
#include "kiln/error.h"

namespace kiln::artifact {
namespace {

using nlohmann::json;

json signature_json(const TensorSignature& signature) {
  return {{"dtype", dtype_name(signature.dtype)}, {"shape", signature.shape}};
}

// Reads fields of one JSON object, failing with the file and the field's path.
class Fields {
 public:
  Fields(const json& object, std::string where, std::string path)
      : object_(object), where_(std::move(where)), path_(std::move(path)) {
    if (!object_.is_object()) fail_at(path_.empty() ? "the manifest" : path_, "a JSON object");
  }

  const json& at(const char* key, bool (json::*is)() const, const char* expected) const {
    auto found = object_.find(key);
    if (found == object_.end() || !((*found).*is)()) fail_at(name(key), expected);
    return *found;
  }
  std::string text(const char* key) const {
    return at(key, &json::is_string, "a string").get<std::string>();
  }
  int64_t integer(const char* key) const {
    return at(key, &json::is_number_integer, "an integer").get<int64_t>();
  }
  DType dtype(const char* key) const {
    std::optional<DType> dtype = dtype_from_name(text(key));
    if (!dtype) fail_at(name(key), "a dtype name (f32, u8, i32, ...)");
    return *dtype;
  }
  std::vector<int64_t> dims(const char* key) const {
    const json& value = at(key, &json::is_array, "a list of sizes");
    std::vector<int64_t> dims;
    for (const json& dim : value) {
      if (!dim.is_number_integer() || dim.get<int64_t>() < 0) {
        fail_at(name(key), "a list of sizes >= 0");
      }
      dims.push_back(dim.get<int64_t>());
    }
    return dims;
  }
  std::vector<std::string> texts(const char* key) const {
    const json& value = at(key, &json::is_array, "a list of strings");
    std::vector<std::string> out;
    for (const json& item : value) {
      if (!item.is_string()) fail_at(name(key), "a list of strings");
      out.push_back(item.get<std::string>());
    }
    return out;
  }
  Fields object(const char* key) const {
    return Fields(at(key, &json::is_object, "an object"), where_, name(key));
  }
  const json& raw() const { return object_; }
  std::string name(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
  [[noreturn]] void fail_at(const std::string& field, const char* expected) const {
    fail(kUnknownSite, fmt::format("{}: \"{}\" must be {}", where_, field, expected),
         "the manifest is written by `kiln export`; export the run again rather than editing it");
  }

 private:
  const json& object_;
  std::string where_;
  std::string path_;
};

TensorSignature signature_of(const Fields& fields) {
  return TensorSignature{fields.dtype("dtype"), fields.dims("shape")};
}

}  // namespace

std::string manifest_text(const Manifest& m) {
  json out = {
      {"format_version", m.format_version},
      {"name", m.name},
      {"version", m.version},
      {"content_sha256", m.content_sha256},
      {"input", signature_json(m.input)},
      {"output", signature_json(m.output)},
      {"preprocessing",
       {{"normalize", m.normalize},
        {"raw_dtype", dtype_name(m.raw_dtype)},
        {"raw_shape", m.raw_shape}}},
      {"program_inputs", m.program_inputs},
      {"files", m.files},
      {"source",
       {{"run", m.run},
        {"run_dir", m.run_dir},
        {"config_sha256", m.config_sha256},
        {"data_sha256", m.data_sha256},
        {"params_sha256", m.params_sha256},
        {"kernels", m.kernels},
        {"kiln_version", m.kiln_version}}},
  };
  if (m.csv) {
    out["preprocessing"]["csv"] = {{"feature_columns", m.csv->feature_columns},
                                   {"header", m.csv->header},
                                   {"skip_lines", m.csv->skip_lines}};
  }
  if (m.test_accuracy) out["source"]["test_accuracy"] = *m.test_accuracy;
  if (m.checkpoint_step) out["source"]["checkpoint_step"] = *m.checkpoint_step;
  out["source"]["code"] = {{"commit", m.code_commit}, {"dirty", m.code_dirty}};
  out["evaluation"] = {{"predictions", m.evaluated}, {"correct", m.correct}};
  return io::json_text(out, 2) + "\n";
}

Manifest parse_manifest(std::string_view text, const std::string& where) {
  json document = io::parse_json(text, where);
  Fields fields(document, where, "");
  Manifest m;
  m.format_version = fields.integer("format_version");
  if (m.format_version > kFormatVersion) {
    fail(kUnknownSite,
         fmt::format("{}: artifact format {} is newer than this kiln reads ({})", where,
                     m.format_version, kFormatVersion),
         "load it with the kiln that exported it, or a later one");
  }
  m.name = fields.text("name");
  m.version = fields.text("version");
  m.content_sha256 = fields.text("content_sha256");
  m.input = signature_of(fields.object("input"));
  m.output = signature_of(fields.object("output"));
  Fields preprocessing = fields.object("preprocessing");
  m.normalize = preprocessing.text("normalize");
  m.raw_dtype = preprocessing.dtype("raw_dtype");
  m.raw_shape = preprocessing.dims("raw_shape");
  if (preprocessing.raw().contains("csv")) {
    Fields csv = preprocessing.object("csv");
    m.csv = CsvLayout{csv.texts("feature_columns"),
                      csv.at("header", &json::is_boolean, "true or false").get<bool>(),
                      csv.integer("skip_lines")};
  }
  m.program_inputs = fields.texts("program_inputs");
  Fields files = fields.object("files");
  for (const auto& [file, sha] : files.raw().items()) {
    if (!sha.is_string()) files.fail_at(files.name(file), "a SHA-256 in hex");
    m.files[file] = sha.get<std::string>();
  }
  Fields source = fields.object("source");
  m.run = source.text("run");
  m.run_dir = source.text("run_dir");
  m.config_sha256 = source.text("config_sha256");
  m.data_sha256 = source.text("data_sha256");
  m.params_sha256 = source.text("params_sha256");
  m.kernels = source.text("kernels");
  m.kiln_version = source.text("kiln_version");
  Fields code = source.object("code");
  m.code_commit = code.text("commit");
  m.code_dirty = code.at("dirty", &json::is_boolean, "true or false").get<bool>();
  Fields evaluation = fields.object("evaluation");
  m.evaluated = evaluation.integer("predictions");
  m.correct = evaluation.integer("correct");
  if (source.raw().contains("checkpoint_step"))
    m.checkpoint_step = source.integer("checkpoint_step");
  if (source.raw().contains("test_accuracy")) {
    m.test_accuracy = source.at("test_accuracy", &json::is_number, "a number").get<double>();
  }
  return m;
}

}  // namespace kiln::artifact
