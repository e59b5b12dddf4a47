// A run's final weights as its model's trees (run_weights.h).
#include "train/run_weights.h"

#include <algorithm>
#include <map>
#include <string>
#include <system_error>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "io/bounded_read.h"
#include "io/savepoint.h"
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

nn::Variables savepoint_variables(const fs::path& run_dir, const nn::Module& model,
                                  const AbstractValue& input, int64_t step) {
  std::vector<savepoint::Committed> committed = savepoint::list_committed(run_dir / "savepoints");
  auto found = std::find_if(committed.begin(), committed.end(),
                            [&](const savepoint::Committed& c) { return c.step == step; });
  if (found == committed.end()) {
    std::vector<int64_t> steps;
    for (const savepoint::Committed& c : committed) steps.push_back(c.step);
    fail(
        kUnknownSite,
        fmt::format("run '{}' has no savepoint of step {}; it has {}", io::printable_path(run_dir),
                    step, steps.empty() ? "none" : fmt::format("steps {}", fmt::join(steps, ", "))),
        "give one of those steps, or leave --checkpoint out for the final weights");
  }
  savepoint::Loaded loaded = savepoint::load(found->path);
  track::RunInfo info = track::read_run_info(run_dir);
  if (!loaded.run_id.empty() && !info.run_id.empty() && loaded.run_id != info.run_id) {
    fail(kUnknownSite, fmt::format("savepoint '{}' is of run {}, not of this run ({})",
                                   io::printable_path(found->path), loaded.run_id, info.run_id));
  }
  nn::Variables like = model.init(random::key(0), input);
  nn::Variables variables{savepoint::restore_tree(loaded, "params", like.params), Tree()};
  if (like.state.num_leaves() > 0) {
    variables.state = savepoint::restore_tree(loaded, "model_state", like.state);
  }
  return variables;
}

}  // namespace kiln::train
