// Snapshots of a run's state and their restoration (train_savepoint.h).
#include "train/train_savepoint.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "io/json_text.h"
#include "kiln/error.h"

namespace kiln::train {
namespace {

using nlohmann::json;

json counters_json(const SavedCounters& c) {
  // The loss scale's state is the tensors of tree "loss_scale"; here its counter of skips.
  json loss_scale = nullptr;
  if (c.overflow_steps) loss_scale = {{"overflow_steps", *c.overflow_steps}};
  return {{"step", c.step},
          // The data pipeline's iterator state: {epoch, position}, position counted in
          // batches of batch_size (example position * batch_size).
          {"data",
           {{"epoch", c.data.epoch},
            {"position", c.data.position},
            {"unit", "batch"},
            {"batch_size", c.batch_size}}},
          {"skipped_steps", c.skipped_steps},
          {"metrics_lines", c.metrics_lines},
          {"epoch_totals",
           {{"loss_sum", c.epoch_loss_sum},
            {"batches", c.epoch_batches},
            {"correct", c.epoch_correct},
            {"examples", c.epoch_examples}}},
          // null without dynamic loss scaling.
          {"loss_scale", loss_scale}};
}

int64_t integer_at(const savepoint::Loaded& loaded, const json& parent, const char* key,
                   const char* where) {
  if (!parent.is_object() || !parent.contains(key) || !parent[key].is_number_integer()) {
    fail(kUnknownSite, fmt::format("savepoint '{}': manifest.json: state {}.{} must be an integer",
                                   loaded.path.string(), where, key));
  }
  return parent[key].get<int64_t>();
}

}  // namespace

savepoint::Snapshot take_snapshot(const TrainState& state, const RunKeys& keys,
                                  const SavedCounters& counters, const RunIdentity& identity) {
  savepoint::Snapshot snapshot;
  snapshot.step = counters.step;
  Tree rng = Tree::dict({{"data", keys.data}, {"dropout", keys.dropout}});
  snapshot.trees = {{"params", savepoint::copy_tree("params", state.params)},
                    {"model_state", savepoint::copy_tree("model_state", state.model_state)},
                    {"opt_state", savepoint::copy_tree("opt_state", state.opt_state)},
                    {"rng", savepoint::copy_tree("rng", rng)}};
  if (state.loss_scale.num_leaves() > 0) {
    snapshot.trees.push_back({"loss_scale", savepoint::copy_tree("loss_scale", state.loss_scale)});
  }
  snapshot.state_json = io::json_text(counters_json(counters));
  snapshot.identity_json = identity_json_text(identity);
  return snapshot;
}

Restored restore(const savepoint::Loaded& loaded, const TrainState& like,
                 const RunKeys& keys_like) {
  Restored restored;
  restored.state.params = savepoint::restore_tree(loaded, "params", like.params);
  restored.state.model_state = savepoint::restore_tree(loaded, "model_state", like.model_state);
  restored.state.opt_state = savepoint::restore_tree(loaded, "opt_state", like.opt_state);
  // A savepoint of a run without dynamic loss scaling (a resume that turned it on with
  // --allow-changed) starts from the initial scale.
  restored.state.loss_scale = like.loss_scale;
  if (like.loss_scale.num_leaves() > 0) {
    for (const auto& [name, arrays] : loaded.trees) {
      if (name == "loss_scale") {
        restored.state.loss_scale = savepoint::restore_tree(loaded, "loss_scale", like.loss_scale);
      }
    }
  }
  Tree rng = savepoint::restore_tree(
      loaded, "rng", Tree::dict({{"data", keys_like.data}, {"dropout", keys_like.dropout}}));
  restored.keys = RunKeys{rng["data"].leaf(), rng["dropout"].leaf()};
  const json state = json::parse(loaded.state_json);  // an object: load() checked
  SavedCounters& c = restored.counters;
  c.step = integer_at(loaded, state, "step", "");
  if (c.step != loaded.step) {
    fail(kUnknownSite, fmt::format("savepoint '{}': manifest.json: state.step {} differs from "
                                   "step {}",
                                   loaded.path.string(), c.step, loaded.step));
  }
  // value(), not operator[]: a const json must not be asked for a key it lacks.
  const json data = state.value("data", json());
  c.data.epoch = integer_at(loaded, data, "epoch", "data");
  c.data.position = integer_at(loaded, data, "position", "data");
  c.batch_size = integer_at(loaded, data, "batch_size", "data");
  c.skipped_steps = integer_at(loaded, state, "skipped_steps", "");
  c.metrics_lines = integer_at(loaded, state, "metrics_lines", "");
  const json loss_scale = state.value("loss_scale", json());
  if (loss_scale.is_object()) {
    c.overflow_steps = integer_at(loaded, loss_scale, "overflow_steps", "loss_scale");
  }
  const json& totals = state.value("epoch_totals", json());
  if (!totals.is_object() || !totals.value("loss_sum", json()).is_number()) {
    fail(kUnknownSite, fmt::format("savepoint '{}': manifest.json: state.epoch_totals.loss_sum "
                                   "must be a number",
                                   loaded.path.string()));
  }
  c.epoch_loss_sum = totals["loss_sum"].get<double>();
  c.epoch_batches = integer_at(loaded, totals, "batches", "epoch_totals");
  c.epoch_correct = integer_at(loaded, totals, "correct", "epoch_totals");
  c.epoch_examples = integer_at(loaded, totals, "examples", "epoch_totals");
  return restored;
}

}  // namespace kiln::train
