// `kiln export RUN` and `kiln predict ARTIFACT INPUT.npy`: a completed run as a versioned
// model artifact, and that artifact loaded alone to predict (src/artifact,
// docs/artifacts.md).
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "artifact/artifact.h"
#include "artifact/export.h"
#include "artifact/records.h"
#include "artifact/verify.h"
#include "cli/commands.h"
#include "cli/output.h"
#include "data/npy.h"
#include "kiln/ops.h"

namespace kiln::cli {
namespace {

struct ExportCommandOptions {
  std::string run;
  artifact::ExportOptions export_options;
};

int run_export(const ExportCommandOptions& options) {
  artifact::ExportResult result = artifact::export_run(options.run, options.export_options);
  if (result.already_exported) {
    print_result(fmt::format("already exported: {} has the same content (nothing written)\n{}\n",
                             result.version, result.dir.string()));
  } else {
    print_result(
        fmt::format("exported version {}: the reloaded artifact matches the trainer's "
                    "outputs bit for bit on {} evaluation examples\n{}\n",
                    result.version, result.parity_examples, result.dir.string()));
  }
  return 0;
}

struct PredictCommandOptions {
  std::string artifact;
  std::string input;
  std::string output;  // the outputs as .npy; empty: print the classes
};

int run_predict(const PredictCommandOptions& options) {
  artifact::Artifact model = artifact::Artifact::load(options.artifact);
  data::RawArray raw = artifact::read_records(options.input, model.manifest());
  std::vector<int64_t> shape = raw.shape;
  Array x = from_host_bytes(raw.bytes.data(),
                            AbstractValue(Shape{std::span<const int64_t>(shape)}, raw.dtype),
                            nullptr, CallSite());
  Array outputs = model.predict(x);
  if (!options.output.empty()) {
    HostArray host = outputs.to_host();
    data::RawArray out;
    out.dtype = host.aval.dtype;
    out.shape.assign(host.aval.shape.dims().begin(), host.aval.shape.dims().end());
    out.bytes.assign(reinterpret_cast<const uint8_t*>(host.bytes.data()),
                     reinterpret_cast<const uint8_t*>(host.bytes.data()) + host.bytes.size());
    data::write_npy(options.output, out);
    print_result(fmt::format("{} {} written to {}\n", host.aval.to_string(), "outputs (logits)",
                             options.output));
    return 0;
  }
  // One line per record: the predicted class (the largest output).
  Array classes = argmax(outputs, -1, DType::i32);
  std::vector<int32_t> chosen = classes.to_vector<int32_t>();
  std::string text;
  for (int32_t c : chosen) text += fmt::format("{}\n", c);
  print_result(text);
  return 0;
}

int run_verify(const std::string& artifact) {
  bool ok = true;
  std::string text;
  for (const artifact::Check& check : artifact::verify_artifact(artifact)) {
    text += fmt::format("{}  {}\n", check.ok ? "ok  " : "FAIL", check.what);
    ok = ok && check.ok;
  }
  text += ok ? "verified\n" : "not verified\n";
  print_result(text);
  return ok ? 0 : 1;
}

struct ReproduceCommandOptions {
  std::string artifact;
  std::string runs_dir = "runs/reproduce";
};

int run_reproduce(const ReproduceCommandOptions& options) {
  std::fprintf(stderr, "training %s/config.toml again (under %s)...\n", options.artifact.c_str(),
               options.runs_dir.c_str());
  artifact::Reproduction result = artifact::reproduce_artifact(options.artifact, options.runs_dir);
  std::string text;
  if (result.same()) {
    text = fmt::format("reproduced: the same weights bit for bit (params SHA-256 {})\n{}\n",
                       result.params_sha256, result.run_dir.string());
  } else {
    text = fmt::format("NOT reproduced: params SHA-256 {}, the artifact's {}\n",
                       result.params_sha256, result.expected_sha256);
    for (const std::string& difference : result.differences) text += "  " + difference + "\n";
    text += result.run_dir.string() + "\n";
  }
  print_result(text);
  return result.same() ? 0 : 1;
}

}  // namespace

Runner add_verify_command(CLI::App& app) {
  auto* command = app.add_subcommand(
      "verify", "Check an artifact: its files, its program, its data and its stated evaluation");
  command->footer(
      "Checks every file against the manifest's SHA-256, parses and verifies the program,\n"
      "loads the data its config names and compares the data's identity with the one it\n"
      "was evaluated on, and evaluates the artifact again: the same predictions must be\n"
      "right as the manifest and MODEL_CARD.md state. Exit status 0 verified, 1 not.\n"
      "Example:\n"
      "  kiln verify artifacts/fashion_mnist_mlp/1.0.0+0123456789ab");
  auto artifact = std::make_shared<std::string>();
  command->add_option("ARTIFACT", *artifact, "The artifact directory")
      ->required()
      ->check(CLI::ExistingDirectory);
  return [artifact] { return run_verify(*artifact); };
}

Runner add_reproduce_command(CLI::App& app) {
  auto* command = app.add_subcommand(
      "reproduce", "Train an artifact's config again and confirm the same weights bit for bit");
  command->footer(
      "Trains the artifact's config.toml again (a new run under --runs-dir) and compares the\n"
      "final weights' SHA-256 with the artifact's. When they differ it says what else\n"
      "differs: the data's identity, kiln's version, the kernels, the code's commit. Exit\n"
      "status 0 the same bits, 1 not.\n"
      "Example:\n"
      "  kiln reproduce artifacts/fashion_mnist_mlp/1.0.0+0123456789ab");
  auto options = std::make_shared<ReproduceCommandOptions>();
  command->add_option("ARTIFACT", options->artifact, "The artifact directory")
      ->required()
      ->check(CLI::ExistingDirectory);
  command->add_option("--runs-dir", options->runs_dir, "Where the new run goes")
      ->capture_default_str();
  return [options] { return run_reproduce(*options); };
}

Runner add_export_command(CLI::App& app) {
  auto* command = app.add_subcommand(
      "export",
      "Export a completed run as a versioned model artifact (program, weights, manifest)");
  command->footer(
      "Writes <artifacts>/<name>/<version>/: the model's inference program in evaluation mode\n"
      "(kiln's program text), its weights and preprocessing (weights.safetensors) and\n"
      "manifest.json (signature, file hashes, the run, config, data and kiln it came from).\n"
      "The artifact is loaded back alone and run on the run's evaluation set before it is\n"
      "moved into place: its outputs must equal the trainer's bit for bit. The version is\n"
      "<semver>+<content hash>; exporting the same content again writes nothing. With --onnx\n"
      "the artifact also holds model.onnx, which takes the same preprocessed input batch.\n"
      "See docs/artifacts.md.\n"
      "Examples:\n"
      "  kiln export runs/fashion_mnist_mlp/RUN\n"
      "  kiln export runs/fashion_mnist_mlp/RUN --name fashion_classifier --artifacts /srv/models\n"
      "  kiln export runs/fashion_mnist_cnn/RUN --onnx");
  auto options = std::make_shared<ExportCommandOptions>();
  command->add_option("RUN", options->run, "The run directory (<runs_dir>/<experiment>/<run-id>)")
      ->required()
      ->check(CLI::ExistingDirectory);
  command->add_option("--name", options->export_options.name,
                      "The artifact's name (default: the run's experiment)");
  command
      ->add_option("--artifacts", options->export_options.artifacts_dir,
                   "Where artifacts are written")
      ->capture_default_str();
  command->add_option("--checkpoint", options->export_options.checkpoint,
                      "Export the weights of the run's savepoint of this step (the run need not "
                      "have completed) instead of its final weights");
  command->add_flag("--onnx", options->export_options.onnx,
                    "Also write model.onnx: the inference program in ONNX (opset 17), checked "
                    "by ONNX's checker; a program with a primitive it cannot translate is "
                    "refused by name");
  return [options] { return run_export(*options); };
}

Runner add_predict_command(CLI::App& app) {
  auto* command = app.add_subcommand(
      "predict", "Predict with an exported model artifact alone: one class per input record");
  command->footer(
      "Loads the artifact (every file checked against its manifest's SHA-256, the program\n"
      "parsed and verified), preprocesses the records as the training data was, runs the\n"
      "program and prints the predicted class of each record, one per line. INPUT is a .npy\n"
      "or IDX file of records in the training data's dtype and shape, e.g. u8 [n,28,28]\n"
      "images, or for a model trained on a CSV file a .csv file laid out like it (the same\n"
      "header and feature columns; other columns such as the label are ignored);\n"
      "--output writes the outputs themselves as .npy.\n"
      "Example:\n"
      "  kiln predict artifacts/fashion_mnist_mlp/1.0.0+0123456789ab images.npy");
  auto options = std::make_shared<PredictCommandOptions>();
  command->add_option("ARTIFACT", options->artifact, "The artifact directory")
      ->required()
      ->check(CLI::ExistingDirectory);
  command
      ->add_option("INPUT", options->input,
                   "Records to predict: a .npy file, an IDX file (.idx, -idx..., plain or "
                   ".gz), or a .csv file laid out like the model's training data")
      ->required()
      ->check(CLI::ExistingFile);
  command->add_option("-o,--output", options->output,
                      "Write the outputs (the logits, f32) to this .npy file instead of printing "
                      "the classes");
  return [options] { return run_predict(*options); };
}

}  // namespace kiln::cli
