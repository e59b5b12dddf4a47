// Verifying and reproducing an artifact (verify.h).
#include "artifact/verify.h"

#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "artifact/artifact.h"
#include "artifact/model_card.h"
#include "io/bounded_read.h"
#include "kiln/error.h"
#include "kiln/random.h"
#include "kiln/version.h"
#include "track/run_environment.h"
#include "track/run_info.h"
#include "train/batches.h"
#include "train/config.h"
#include "train/evaluation.h"
#include "train/run_identity.h"
#include "train/trainer.h"

namespace kiln::artifact {
namespace {

namespace fs = std::filesystem;

Check evaluation_check(const Artifact& artifact, const train::RunData& data) {
  const Manifest& m = artifact.manifest();
  Evaluation evaluation;
  train::for_each_batch(*data.test, data.dataset.input_dtype,
                        [&](const train::Batch& batch, const data::HostBatch& host) {
                          evaluation.add(artifact.run(batch.images), host.labels, host.examples());
                        });
  bool same = evaluation.predictions == m.evaluated && evaluation.correct == m.correct;
  return {same, fmt::format(
                    "evaluation: {} of {} predictions right{}", evaluation.correct,
                    evaluation.predictions,
                    same ? ", as the manifest and the model card state"
                         : fmt::format("; the manifest states {} of {}", m.correct, m.evaluated))};
}

}  // namespace

std::vector<Check> verify_artifact(const fs::path& dir) {
  std::vector<Check> checks;
  Artifact artifact = Artifact::load(dir);  // a file that does not match is an error
  const Manifest& m = artifact.manifest();
  checks.push_back({true, fmt::format("files: {} match their SHA-256 and the content hash {}",
                                      m.files.size(), m.content_sha256.substr(0, 12))});
  checks.push_back({true, fmt::format("program: parsed and verified; it takes {}[{}] and gives "
                                      "{}[{}]",
                                      dtype_name(m.input.dtype), fmt::join(m.input.shape, ","),
                                      dtype_name(m.output.dtype), fmt::join(m.output.shape, ","))});
  train::TrainConfig config = train::load_config(dir / "config.toml");
  std::optional<train::RunData> data;
  try {
    data.emplace(config, random::key(0));
  } catch (const std::exception& error) {
    checks.push_back(
        {false, fmt::format("data: cannot load the data config.toml names: {}", error.what())});
    return checks;
  }
  bool same_data = data->dataset.identity == m.data_sha256;
  checks.push_back(
      {same_data,
       same_data ? fmt::format("data: identity {} as at export", m.data_sha256.substr(0, 12))
                 : fmt::format("data: identity {}, the artifact was evaluated "
                               "on {}: the data changed",
                               data->dataset.identity.substr(0, 12), m.data_sha256.substr(0, 12))});
  checks.push_back(evaluation_check(artifact, *data));
  return checks;
}

Reproduction reproduce_artifact(const fs::path& dir, const fs::path& runs_dir) {
  Artifact artifact = Artifact::load(dir);
  const Manifest& m = artifact.manifest();
  if (m.checkpoint_step) {
    fail(kUnknownSite,
         fmt::format("artifact {} holds the weights of step {} of its run, not the final ones "
                     "that reproduce compares",
                     dir.string(), *m.checkpoint_step),
         "reproduce an artifact exported without --checkpoint; a savepoint is reproduced by "
         "`kiln resume` of its run");
  }
  train::TrainConfig config = train::load_config(
      dir / "config.toml", {fmt::format("experiment.runs_dir=\"{}\"", runs_dir.string())});
  train::TrainOptions options;
  options.quiet = true;
  train::TrainSummary summary = train::train(config, options);
  Reproduction out{summary.run_dir, summary.params_sha256, m.params_sha256, {}};
  if (out.same()) return out;
  track::RunInfo info = track::read_run_info(summary.run_dir);
  auto differs = [&](const char* what, const std::string& then, const std::string& now) {
    if (then != now) out.differences.push_back(fmt::format("{}: {} then, {} now", what, then, now));
  };
  differs("data identity", m.data_sha256, info.identity ? info.identity->data_sha256 : "?");
  differs("kiln version", m.kiln_version, kVersion);
  differs("kernels", m.kernels, info.kernels);
  std::string commit = track::recorded_code(info).commit;
  differs("code commit", m.code_commit.empty() ? "unknown" : m.code_commit,
          commit.empty() ? "unknown" : commit);
  if (out.differences.empty()) {
    out.differences.push_back(
        "nothing recorded differs (same data, kiln, kernels and commit): the machine or its "
        "libraries (the GEMM library's version, the CPU's SIMD target) may; compare the two "
        "runs' environment with `kiln runs compare`");
  }
  return out;
}

}  // namespace kiln::artifact
