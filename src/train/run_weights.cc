// A run's final weights as its model's trees (run_weights.h).
#include "train/run_weights.h"

#include <map>
#include <string>
#include <system_error>
#include <vector>

#include <fmt/format.h>

#include "io/bounded_read.h"
#include "kiln/error.h"
#include "kiln/random.h"
#include "kiln/safetensors.h"
#include "track/run_info.h"
#include "train/run_directory.h"

namespace kiln::train {
namespace {

namespace fs = std::filesystem;

// The tree of structure `like` with the file's tensors, matched by path.
Tree tree_from(const Tree& like, const fs::path& file, const fs::path& run_dir) {
  std::map<std::string, Array> tensors;
  for (auto& [name, array] : load_safetensors(file).arrays) tensors.emplace(name, array);
  std::vector<Array> leaves;
  for (const auto& [path, leaf] : like.leaves_with_paths()) {
    auto found = tensors.find(path);
    if (found == tensors.end() || found->second.shape() != leaf.shape()) {
      fail(kUnknownSite,
           fmt::format("'{}': {} has {} for '{}', the config's model needs {}",
                       io::printable_path(run_dir), file.filename().string(),
                       found == tensors.end() ? "no tensor" : found->second.aval().to_string(),
                       path, leaf.aval().to_string()),
           "the weights are not this config's model");
    }
    leaves.push_back(found->second);
  }
  return unflatten(like.structure(), leaves);
}

}  // namespace

nn::Variables final_variables(const fs::path& run_dir, const nn::Module& model,
                              const AbstractValue& input) {
  std::error_code error;
  if (!fs::is_regular_file(run_dir / "params.safetensors", error)) {
    fail(kUnknownSite,
         fmt::format("run '{}' has no final weights (params.safetensors): it has not completed",
                     io::printable_path(run_dir)),
         "finish it with `kiln resume RUN`, or lower train.max_steps for a shorter run");
  }
  track::RunInfo info = track::read_run_info(run_dir);
  if (std::string problem = final_weights_problem(run_dir, info); !problem.empty()) {
    fail(kUnknownSite, fmt::format("run '{}': {}", io::printable_path(run_dir), problem),
         "the weights were changed after the run ended; train the config again");
  }
  nn::Variables like = model.init(random::key(0), input);
  nn::Variables variables{tree_from(like.params, run_dir / "params.safetensors", run_dir), Tree()};
  if (like.state.num_leaves() > 0) {
    variables.state = tree_from(like.state, run_dir / "state.safetensors", run_dir);
  }
  return variables;
}

}  // namespace kiln::train
