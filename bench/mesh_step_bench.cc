// What determinism costs in the data-parallel train step, and what tensor parallelism
// costs against data parallelism on the same devices, measured side by side in one run.
//
// Deterministic mode (kiln's default) splits every batch into mesh.chunks chunks whatever
// the device count, so that 1, 2 and 4 devices add the same numbers in the same order.
// The fast mode a user would otherwise pick gives each device one chunk (chunks = devices):
// larger matmuls, fewer adds, but bits that change with the device count. For each device
// count the two alternate round by round (the machine is noisy) and the ratio is taken
// per round. The step without a mesh (one device, one chunk) is the third column.
//
//   KILN_CPU_DEVICES=4 build/release/bench/mesh_step_bench --config examples/fashion_mnist_mlp.toml
//   KILN_CPU_DEVICES=4 build/release/bench/mesh_step_bench --tensor  # + DP vs data x tensor
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "kiln/device.h"
#include "kiln/profile.h"
#include "kiln/random.h"
#include "train/builders.h"
#include "train/config.h"
#include "train/train_step.h"

using namespace kiln;

namespace {

Array host_copy(const Array& x) {
  HostArray host = x.to_host();
  return from_host_bytes(host.bytes.data(), x.aval(), &device(0), kUnknownSite);
}

struct Bench {
  train::TrainConfig config;
  nn::Module model;
  optim::GradientTransformation optimizer;
  nn::Variables variables;
  Array images, labels, key;
};

// A step and its own state (each side of a pair donates and replaces its own).
struct Runner {
  train::TrainStep step;
  train::TrainState state;
  void operator()() {
    // The bench's batch is fixed, so the same arrays serve every step.
    step.run(state, bench->images, bench->labels, bench->key).loss.block_until_ready();
  }
  const Bench* bench;
};

Runner runner(const Bench& b, const nn::Module& model, train::StepOptions options) {
  // Fresh buffers: the step without a mesh donates the params it is given.
  auto fresh = [](const Tree& tree) {
    if (tree.num_leaves() == 0) return tree;
    return tree_map([](const Array& x) { return host_copy(x); }, tree);
  };
  Tree params = fresh(b.variables.params);
  train::TrainState state{params, fresh(b.variables.state), b.optimizer.init(params)};
  return Runner{train::TrainStep(model, b.optimizer, options), state, &b};
}

train::StepOptions mesh_options(const train::TrainConfig& config, int64_t data, int64_t chunks) {
  train::StepOptions options;
  options.flush_denormals = config.train.flush_denormals;
  options.data_devices = data;
  options.chunks = chunks;
  return options;
}

void print_row(const std::string& label, const profile::Alternation& pairs) {
  fmt::print("{:<34} {:>9.2f} {:>9.2f}   {} (median {:.2f})\n", label,
             1e3 * profile::median(pairs.a_s), 1e3 * profile::median(pairs.b_s),
             profile::format_ratios(pairs.ratios()), pairs.median_ratio());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Determinism's cost in the data-parallel step, and tensor vs data parallel"};
  std::string config_path = "examples/fashion_mnist_mlp.toml";
  int rounds = 7, calls = 10;
  bool tensor = false;
  app.add_option("--config", config_path, "Training config (its model, optimizer, batch size)");
  app.add_option("--rounds", rounds, "Alternating A/B rounds");
  app.add_option("--calls", calls, "Steps per sample (a sample is their median)");
  app.add_flag("--tensor", tensor,
               "Also time data parallel on 4 devices against data 2 x tensor 2 "
               "(examples/fashion_mnist_mlp_tensor_parallel.toml's layers)");
  CLI11_PARSE(app, argc, argv);

  Bench b{train::load_config(config_path), nn::Module(nullptr), {}, {}, {}, {}, {}};
  const int64_t batch = b.config.train.batch_size;
  const int64_t chunks = b.config.mesh.chunks;
  b.model = train::build_model(b.config.model);
  b.optimizer = train::build_optimizer(b.config.optim, 100000);
  AbstractValue input(Shape{batch, 28, 28, 1}, DType::f32);
  b.variables = b.model.init(random::key(0), input);
  b.images = random::uniform(random::key(1), input.shape);
  std::vector<int32_t> label_values(static_cast<size_t>(batch));
  for (size_t i = 0; i < label_values.size(); ++i) label_values[i] = static_cast<int32_t>(i % 10);
  b.labels = from_host<int32_t>(label_values, Shape{batch});
  b.key = random::key(3);
  const auto available = static_cast<int64_t>(devices().size());
  profile::AlternateOptions alternate{.rounds = rounds, .calls = calls, .pause_s = 0.001};

  fmt::print("{} (batch {}), {} logical devices, {} rounds of {} steps; ms per step\n", config_path,
             batch, available, rounds, calls);
  fmt::print("{:<34} {:>9} {:>9}   B/A per round\n", "A vs B", "A", "B");
  for (int64_t data = 1; data <= available && data <= chunks; data *= 2) {
    if (chunks % data != 0) continue;
    Runner fast = runner(b, b.model, mesh_options(b.config, data, data));
    Runner deterministic = runner(b, b.model, mesh_options(b.config, data, chunks));
    print_row(fmt::format("data={}: chunks={} vs chunks={}", data, data, chunks),
              profile::alternate(fast, deterministic, alternate));
  }
  train::StepOptions no_mesh;
  no_mesh.flush_denormals = b.config.train.flush_denormals;
  Runner plain = runner(b, b.model, no_mesh);
  Runner one_device_mesh = runner(b, b.model, mesh_options(b.config, 1, chunks));
  print_row(fmt::format("no mesh vs data=1 chunks={}", chunks),
            profile::alternate(plain, one_device_mesh, alternate));

  if (tensor) {
    if (available < 4) {
      std::fprintf(stderr, "--tensor needs KILN_CPU_DEVICES=4\n");
      return 1;
    }
    train::TrainConfig tp = train::load_config("examples/fashion_mnist_mlp_tensor_parallel.toml");
    nn::Module split = train::build_model(tp.model);
    Runner data_parallel = runner(b, b.model, mesh_options(b.config, 4, chunks));
    train::StepOptions options = mesh_options(b.config, 2, chunks);
    options.model_devices = 2;
    options.tensor_parallel = train::tensor_parallel_specs(tp.model);
    Runner data_by_tensor = runner(b, split, options);
    print_row("data=4 vs data=2 x model=2",
              profile::alternate(data_parallel, data_by_tensor, alternate));
  }
  return 0;
}
