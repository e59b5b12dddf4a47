// Exporting a run as an artifact (export.h).
#include "artifact/export.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <regex>
#include <vector>

#include <fmt/format.h>

#include "artifact/artifact.h"
#include "artifact/model_card.h"
#include "artifact/onnx_export.h"
#include "data/batch.h"
#include "io/atomic_file.h"
#include "io/bounded_read.h"
#include "io/sha256.h"
#include "ir/printer.h"
#include "ir/program.h"
#include "kiln/error.h"
#include "kiln/jit.h"
#include "kiln/ops.h"
#include "kiln/random.h"
#include "kiln/safetensors.h"
#include "kiln/tracing.h"
#include "kiln/version.h"
#include "track/run_environment.h"
#include "track/run_info.h"
#include "train/batches.h"
#include "train/builders.h"
#include "train/config.h"
#include "train/evaluation.h"
#include "train/run_weights.h"

namespace kiln::artifact {
namespace {

namespace fs = std::filesystem;

// What the model computes at inference: evaluation mode, the variables as inputs.
struct Inference {
  nn::Module model;
  Array operator()(const Tree& params, const Tree& state, const Array& x) const {
    return model.apply(nn::Variables{params, state}, x).y;
  }
};

struct Exported {
  std::shared_ptr<const Program> program;
  std::string program_text;
  NamedArrays weights;  // the program's inputs but the last, then the preprocessing
  std::vector<std::string> program_inputs;
  AbstractValue output;
};

Exported trace_inference(const Inference& inference, const nn::Variables& variables,
                         const AbstractValue& input) {
  TracedProgram traced =
      make_program(inference, variables.params, variables.state, zeros(input.shape, input.dtype));
  const Program& program = *traced.program;
  Exported out;
  out.program = traced.program;
  out.program_text = print_program(program);
  for (const char* part : {"params", "state"}) {
    const Tree& tree = std::string_view(part) == "params" ? variables.params : variables.state;
    for (const auto& [path, leaf] : tree.leaves_with_paths()) {
      std::string name = fmt::format("{}/{}", part, path);
      out.program_inputs.push_back(name);
      out.weights.emplace_back(name, leaf);
    }
  }
  out.program_inputs.push_back("input");
  // Constants the printed text declares without a value (the rank-0 ones print inline).
  int64_t next = 0;
  for (const Array& value : program.constant_values) {
    if (value.defined() && value.rank() == 0) continue;
    out.weights.emplace_back(fmt::format("constants/{}", next++), value);
  }
  out.output = program.aval(program.outputs.at(0));
  return out;
}

// The inference program in ONNX, with the weights (not the preprocessing) as initializers.
std::string onnx_of(const Exported& exported, const std::string& name, const track::RunInfo& info) {
  OnnxGraph graph;
  graph.name = name;
  graph.doc = fmt::format(
      "{} exported by kiln {} from run {}: the inference program of "
      "program.txt; inputs are preprocessed as manifest.json says",
      name, kVersion, info.key());
  const size_t weights = exported.program_inputs.size() - 1;
  for (size_t i = 0; i < weights; ++i) {
    graph.weight_names.push_back(exported.program_inputs[i]);
    graph.weights.push_back(exported.weights.at(i).second);
  }
  return onnx_model(*exported.program, graph);
}

// The preprocessing of the training data, as arrays: [1] each, or per element in the
// example's shape.
void add_preprocessing(const data::Dataset& dataset, const std::vector<int64_t>& example,
                       NamedArrays& weights) {
  Shape shape = dataset.scale.size() > 1 ? Shape{std::span<const int64_t>(example)} : Shape{1};
  weights.emplace_back("preprocess/offset", from_host<float>(dataset.offset, shape));
  weights.emplace_back("preprocess/scale", from_host<float>(dataset.scale, shape));
}

// The trainer's evaluation outputs against the artifact's, batch by batch over the whole
// evaluation set; the number of examples compared.
// The evaluation of the artifact's own outputs is gathered on the way (the model card's).
int64_t check_parity(const Artifact& artifact, const Inference& inference,
                     const nn::Variables& variables, const data::BatchAssembler& batches,
                     DType input_dtype, const fs::path& run_dir, Evaluation& evaluation) {
  auto reference = jit(inference, JitOptions().named("export_reference"));
  int64_t examples = 0;
  int64_t index = 0;
  train::for_each_batch(
      batches, input_dtype, [&](const train::Batch& batch, const data::HostBatch& host) {
        Array expected = reference(variables.params, variables.state, batch.images);
        Array actual = artifact.run(batch.images);
        HostArray e = expected.to_host(), a = actual.to_host();
        if (e.aval != a.aval || e.bytes != a.bytes) {
          fail(kUnknownSite,
               fmt::format(
                   "export of {}: the reloaded artifact's outputs differ from the trainer's on "
                   "evaluation batch {} ({} vs {}); nothing was written",
                   io::printable_path(run_dir), index, a.aval.to_string(), e.aval.to_string()),
               "this is a bug in kiln's program text or weights round trip; please report it");
        }
        evaluation.add(actual, host.labels, host.examples());
        examples += host.examples();
        ++index;
      });
  return examples;
}

struct SemVer {
  int64_t major = 0, minor = 0, patch = 0;
  auto operator<=>(const SemVer&) const = default;
};

// The versions already exported under `name_dir`, with their directories.
std::vector<std::pair<SemVer, fs::path>> existing_versions(const fs::path& name_dir) {
  static const std::regex kVersion(R"((\d+)\.(\d+)\.(\d+)\+([0-9a-f]{12}))");
  std::vector<std::pair<SemVer, fs::path>> versions;
  std::error_code error;
  for (const fs::directory_entry& entry : fs::directory_iterator(name_dir, error)) {
    std::smatch match;
    std::string name = entry.path().filename().string();
    if (!entry.is_directory(error) || !std::regex_match(name, match, kVersion)) continue;
    versions.push_back(
        {{std::stoll(match[1]), std::stoll(match[2]), std::stoll(match[3])}, entry.path()});
  }
  std::sort(versions.begin(), versions.end());
  return versions;
}

bool same_signature(const Manifest& a, const Manifest& b) {
  return a.input.dtype == b.input.dtype && a.input.shape == b.input.shape &&
         a.output.dtype == b.output.dtype && a.output.shape == b.output.shape;
}

// The next version of `manifest` among those exported: 1.0.0, then a minor bump for the
// same signature and a major bump for another.
std::string next_version(const std::vector<std::pair<SemVer, fs::path>>& versions,
                         const Manifest& manifest) {
  SemVer next{1, 0, 0};
  if (!versions.empty()) {
    const auto& [latest, dir] = versions.back();
    Manifest previous = parse_manifest(
        io::read_regular_file(dir / "manifest.json", io::kMaxRecordBytes), dir.string());
    next = same_signature(previous, manifest) ? SemVer{latest.major, latest.minor + 1, 0}
                                              : SemVer{latest.major + 1, 0, 0};
  }
  return fmt::format("{}.{}.{}+{}", next.major, next.minor, next.patch,
                     manifest.content_sha256.substr(0, 12));
}

Manifest describe(const track::RunInfo& info, const fs::path& run_dir, const std::string& name,
                  const train::DataConfig& data_config, const data::Dataset& dataset,
                  const AbstractValue& input, const Exported& exported) {
  Manifest m;
  m.name = name;
  m.input = {input.dtype,
             std::vector<int64_t>(input.shape.dims().begin(), input.shape.dims().end())};
  m.output = {exported.output.dtype, std::vector<int64_t>(exported.output.shape.dims().begin(),
                                                          exported.output.shape.dims().end())};
  m.normalize = dataset.input_dtype == DType::i32 ? "none" : dataset.normalize;
  m.raw_dtype = dataset.input_dtype == DType::i32 ? DType::i32 : dataset.train.features.dtype;
  m.raw_shape = dataset.record_shape;
  if (data_config.dataset == "csv") {
    m.csv = CsvLayout{dataset.feature_columns, data_config.header, data_config.skip_lines};
  }
  m.program_inputs = exported.program_inputs;
  m.run = info.key();
  m.run_dir = fs::weakly_canonical(run_dir).string();
  m.config_sha256 = info.config_sha256;
  m.data_sha256 = info.identity ? info.identity->data_sha256 : dataset.identity;
  m.params_sha256 = info.params_sha256;
  m.kernels = info.kernels;
  m.kiln_version = kVersion;
  track::RecordedCode code = track::recorded_code(info);
  m.code_commit = code.commit;
  m.code_dirty = code.dirty();
  if (info.final_metrics && !std::isnan(info.final_metrics->test_accuracy)) {
    m.test_accuracy = info.final_metrics->test_accuracy;
  }
  return m;
}

void check_completed(const track::RunInfo& info, const fs::path& run_dir) {
  if (info.status == "completed") return;
  fail(kUnknownSite,
       fmt::format("run '{}' is {}: only a completed run has final weights to export",
                   io::printable_path(run_dir),
                   info.status.empty() ? "of unknown status" : info.status),
       "finish it with `kiln resume RUN`, then export it");
}

}  // namespace

ExportResult export_run(const fs::path& run_dir, const ExportOptions& options) {
  track::RunInfo info = track::read_run_info(run_dir);
  if (!options.checkpoint) check_completed(info, run_dir);
  train::TrainConfig config = train::load_config(run_dir / "config.toml");
  train::RunData data(config, random::key(0));
  Inference inference{train::build_model(config.model)};
  std::vector<int64_t> example = data::example_input_shape(data.dataset.record_shape);
  std::vector<int64_t> one = example, batch = example;
  one.insert(one.begin(), 1);
  batch.insert(batch.begin(), config.train.eval_batch_size);
  DType input_dtype = data.dataset.input_dtype;
  AbstractValue one_example(Shape{std::span<const int64_t>(one)}, input_dtype);
  nn::Variables variables =
      options.checkpoint
          ? train::savepoint_variables(run_dir, inference.model, one_example, *options.checkpoint)
          : train::final_variables(run_dir, inference.model, one_example);
  AbstractValue input(Shape{std::span<const int64_t>(batch)}, input_dtype);
  Exported exported = trace_inference(inference, variables, input);
  add_preprocessing(data.dataset, example, exported.weights);

  std::string name = options.name.empty() ? info.experiment : options.name;
  fs::path name_dir = options.artifacts_dir / name;
  fs::create_directories(name_dir);
  fs::path staging = name_dir / fmt::format(".export-{}", ::getpid());
  fs::remove_all(staging);
  fs::create_directories(staging);
  try {
    std::string config_toml = io::read_regular_file(run_dir / "config.toml", io::kMaxRecordBytes);
    io::write_file_atomically(staging / "program.txt", exported.program_text);
    io::write_file_atomically(staging / "config.toml", config_toml);
    save_safetensors(staging / "weights.safetensors", exported.weights,
                     {{"format", "kiln artifact weights"}});
    std::vector<std::string> files = {"config.toml", "program.txt", "weights.safetensors"};
    if (options.onnx) {
      io::write_file_atomically(staging / kOnnxModel, onnx_of(exported, name, info));
      files.push_back(kOnnxModel);
    }
    Manifest manifest = describe(info, run_dir, name, config.data, data.dataset, input, exported);
    if (options.checkpoint) {
      // Not the run's final weights: their hash and test accuracy are not this model's.
      manifest.checkpoint_step = options.checkpoint;
      manifest.params_sha256.clear();
      manifest.test_accuracy.reset();
    }
    for (const std::string& file : files) manifest.files[file] = io::sha256_file(staging / file);
    manifest.content_sha256 = content_hash(manifest.files);
    std::vector<std::pair<SemVer, fs::path>> versions = existing_versions(name_dir);
    for (const auto& [version, dir] : versions) {
      if (dir.filename().string().ends_with("+" + manifest.content_sha256.substr(0, 12))) {
        fs::remove_all(staging);
        return ExportResult{dir, dir.filename().string(), true, 0};
      }
    }
    manifest.version = next_version(versions, manifest);
    io::write_file_atomically(staging / "manifest.json", manifest_text(manifest));
    ExportResult result;
    Evaluation evaluation;
    result.parity_examples = check_parity(Artifact::load(staging), inference, variables, *data.test,
                                          input_dtype, run_dir, evaluation);
    // The card, from the evaluation just made, joins the files the manifest checks.
    io::write_file_atomically(staging / kModelCard,
                              model_card(manifest, evaluation, info, data.dataset, config_toml));
    manifest.files[kModelCard] = io::sha256_file(staging / kModelCard);
    manifest.evaluated = evaluation.predictions;
    manifest.correct = evaluation.correct;
    io::write_file_atomically(staging / "manifest.json", manifest_text(manifest));
    result.dir = name_dir / manifest.version;
    result.version = manifest.version;
    fs::rename(staging, result.dir);  // fails rather than replace an existing directory
    return result;
  } catch (...) {
    std::error_code ignored;
    fs::remove_all(staging, ignored);
    throw;
  }
}

}  // namespace kiln::artifact
