// kiln train's extension points: layer types of your own in a config's [[model.layers]],
// and kiln's command line to train, resume, export and report with them.
//
//   int main(int argc, char** argv) {
//     kiln::train::register_layer_type({
//         .name = "residual_mlp",
//         .help = "x + dense(relu(dense(x))), the features kept",
//         .required = {"features"},
//         .build = [](const kiln::train::LayerConfig& layer) {
//           return make_residual_mlp(layer.features);   // an nn::Module
//         }});
//     return kiln::train::command_line_main(argc, argv);   // `kiln`, knowing residual_mlp
//   }
//
// A config may then say `type = "residual_mlp"` with `features = 256`; the fields are
// checked as those of kiln's own layers are (a missing required field, a field the type
// does not take, a value out of range: an error naming the file and the line), and its
// params sit under the type's name ("residual_mlp_3/..." for the fourth layer) whatever
// module build returns. kiln's own layer types are rows of the same table. The program that trained
// a run is the one that can resume, export or report it: `kiln` alone refuses the unknown type by
// name. docs/training.md, *Layer types of your own*.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kiln/error.h"
#include "kiln/nn/module.h"

namespace kiln::train {

// One layer of [[model.layers]]. Which fields a layer reads depends on its type; a field
// given to a layer type that does not use it is an error.
struct LayerConfig {
  std::string type;      // dense, conv2d, max_pool, avg_pool, flatten, dropout, batch_norm,
                         // layer_norm, rms_norm, an activation name (relu, gelu, ...), or
                         // a registered type
  int64_t features = 0;  // dense, conv2d
  std::vector<int64_t> kernel_size;  // conv2d, e.g. [3, 3]
  std::vector<int64_t> window;       // max_pool, avg_pool
  std::vector<int64_t> strides;      // conv2d, max_pool, avg_pool (default: 1 / window)
  std::string padding = "valid";     // conv2d, max_pool, avg_pool: valid or same
  double rate = 0;                   // dropout
  std::string parallel = "none";     // dense: none, column or row (tensor parallel)
  // Every type: the dtype this layer computes in, f32, bf16 or f16 (empty: the model's
  // model.compute_dtype); a mixed-precision policy per layer (docs/precision.md).
  std::string compute_dtype;
  // Every type: in training, rematerialize this layer and the next remat_span - 1 as one
  // block, keeping what the policy saves: none, save_nothing or save_dot_outputs
  // (docs/memory.md). The layers keep their names, so params keep their paths.
  std::string remat = "none";
  int64_t remat_span = 1;
  int64_t line = 0;  // where the layer starts in the file, for errors
  // Compares `line` too: clear it to compare configs read from different texts.
  friend bool operator==(const LayerConfig&, const LayerConfig&) = default;
};

struct LayerType {
  // What a config's `type` names: lower-case letters, digits and '_'.
  std::string name = {};
  // One line, for the errors that list the types (empty: "registered by this program").
  std::string help = {};
  // The fields of LayerConfig the type reads, by their names in the config: features,
  // kernel_size, window, strides, padding, rate. `parallel` is dense's alone.
  std::vector<std::string> required = {};
  std::vector<std::string> optional = {};
  // The layer for one [[model.layers]] table, its fields checked as declared above.
  std::function<nn::Module(const LayerConfig& layer)> build = {};
};

// Makes `type` a layer type of every config this process reads afterwards. Fails on a name
// that is not lower-case letters, digits and '_', one kiln or an earlier call already
// uses, an unknown or repeated field, or an empty build function.
void register_layer_type(LayerType type, CallSite site = {});

// kiln's command line, what the `kiln` program runs (`kiln --help`): call it from the
// main() of a program that registered its layer types first.
int command_line_main(int argc, char** argv);

}  // namespace kiln::train
