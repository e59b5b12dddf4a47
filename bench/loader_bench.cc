// The data loader against the train step it feeds, for an example config: (1) the loader
// alone, how many examples per second its workers deliver when nothing else runs; (2) the
// training loop as `kiln train` runs it (loader + jitted step, the next step queued before
// the previous one's metrics are read), timing each step and the time next() waited.
// Reports the loader's rate over the step's, and the data wait as a fraction of step time.
//
//   build/release/bench/loader_bench --config examples/fashion_mnist_mlp.toml
//   build/release/bench/loader_bench --config examples/fashion_mnist_cnn.toml --json
#include <algorithm>
#include <chrono>
#include <deque>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "data/loader.h"
#include "kiln/nn/module.h"
#include "kiln/profile.h"
#include "kiln/random.h"
#include "train/batches.h"
#include "train/builders.h"
#include "train/config.h"
#include "train/train_step.h"

using namespace kiln;

int main(int argc, char** argv) {
  CLI::App app{"The data loader's throughput against the train step it feeds"};
  std::string config_path = "examples/fashion_mnist_mlp.toml";
  int batches = 400, steps = 150, warmup = 10;
  bool json = false;
  std::vector<std::string> overrides;
  app.add_option("--config", config_path, "Training config (data, model, batch size)");
  app.add_option("--batches", batches, "Batches timed for the loader alone");
  app.add_option("--steps", steps, "Train steps timed (after --warmup)");
  app.add_option("--warmup", warmup, "Steps run before timing (the first one compiles)");
  app.add_option("--set", overrides, "Override a config key, as in `kiln train`");
  app.add_flag("--json", json, "One JSON line instead of text");
  CLI11_PARSE(app, argc, argv);
  using Clock = std::chrono::steady_clock;
  auto seconds = [](Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
  };

  train::TrainConfig config = train::load_config(config_path, overrides);
  Array root = random::key(config.experiment.seed);
  train::RunData data(config, random::fold_in(root, 3));
  int64_t batch = config.train.batch_size;

  // (1) The loader alone.
  double loader_rate = 0;
  {
    data::Loader loader(*data.train, data.loader_options);
    for (int i = 0; i < 5; ++i) loader.next();
    Clock::time_point start = Clock::now();
    int64_t examples = 0;
    for (int i = 0; i < batches; ++i) examples += loader.next().examples();
    loader_rate = static_cast<double>(examples) / seconds(start, Clock::now());
  }

  // (2) The training loop.
  nn::Module model = train::build_model(config.model);
  std::vector<int64_t> input_shape = {1};
  for (int64_t dim : data::example_input_shape(data.dataset.record_shape))
    input_shape.push_back(dim);
  nn::Variables variables =
      model.init(random::fold_in(root, 0),
                 AbstractValue(Shape{std::span<const int64_t>(input_shape)}, DType::f32));
  optim::GradientTransformation optimizer = train::build_optimizer(config.optim, 100000);
  train::TrainState state{variables.params, variables.state, optimizer.init(variables.params)};
  train::StepOptions step_options;
  step_options.flush_denormals = config.train.flush_denormals;
  train::TrainStep step(model, optimizer, step_options);
  Array key = random::key(3);
  data::Loader loader(*data.train, data.loader_options);
  std::deque<Array> pending;
  std::vector<double> step_s, wait_s;
  Clock::time_point last = Clock::now();
  for (int i = 0; i < warmup + steps; ++i) {
    const data::HostBatch& host = loader.next();
    double wait = loader.last_wait_seconds();
    train::Batch arrays = train::to_arrays(host);
    pending.push_back(step.run(state, arrays.images, arrays.labels, key).loss);
    if (pending.size() > 1) {
      pending.front().block_until_ready();
      pending.pop_front();
    }
    Clock::time_point now = Clock::now();
    if (i >= warmup) {
      step_s.push_back(seconds(last, now));
      wait_s.push_back(wait);
    }
    last = now;
  }
  pending.front().block_until_ready();
  double total_step = 0, total_wait = 0;
  for (double s : step_s) total_step += s;
  for (double s : wait_s) total_wait += s;
  double median_step = profile::median(step_s);
  double step_rate = static_cast<double>(batch) / median_step;
  nlohmann::json out = {
      {"config", config_path},
      {"batch", batch},
      {"workers", data.loader_options.workers},
      {"prefetch", data.loader_options.prefetch},
      {"augment", config.data.augment.crop_padding > 0 || config.data.augment.horizontal_flip},
      {"loader_examples_per_s", loader_rate},
      {"median_step_ms", 1e3 * median_step},
      {"step_examples_per_s", step_rate},
      {"loader_over_step", loader_rate / step_rate},
      {"median_wait_ms", 1e3 * profile::median(wait_s)},
      {"max_wait_ms", 1e3 * *std::max_element(wait_s.begin(), wait_s.end())},
      {"starved_steps", loader.starved_calls()},
      {"steps", warmup + steps},
      {"wait_fraction", total_wait / total_step}};
  if (json) {
    fmt::print("{}\n", out.dump());
    return 0;
  }
  fmt::print(
      "{} (batch {}, {} workers, prefetch {}, augmentation {})\n"
      "  loader alone      {:>10.0f} examples/s\n"
      "  train step        {:>10.0f} examples/s (median {:.2f} ms)\n"
      "  loader / step     {:>10.1f}x\n"
      "  data wait         {:>10.3f} ms median, {:.2f} ms max, {:.2f}% of step time\n"
      "  starved steps     {:>10} of {} (the batch was not ready when asked for)\n",
      config_path, batch, data.loader_options.workers, data.loader_options.prefetch,
      out["augment"].get<bool>() ? "on" : "off", loader_rate, step_rate, 1e3 * median_step,
      loader_rate / step_rate, 1e3 * profile::median(wait_s), out["max_wait_ms"].get<double>(),
      100 * total_wait / total_step, loader.starved_calls(), warmup + steps);
  return 0;
}
