// The training run: data, model, optimizer, checks, run directory, the step loop,
// evaluation, and the final weights.
#include "train/trainer.h"

#include <csignal>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <numeric>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "io/sha256.h"
#include "kiln/device.h"
#include "kiln/error.h"
#include "kiln/nn/module.h"
#include "kiln/profile.h"
#include "kiln/random.h"
#include "kiln/safetensors.h"
#include "runtime/runtime.h"
#include "train/batches.h"
#include "train/builders.h"
#include "train/progress.h"
#include "train/run_checks.h"
#include "train/run_directory.h"
#include "train/train_step.h"

namespace kiln::train {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::vector<bool> host_bools(const Array& flags) {
  HostArray host = flags.to_host();
  std::vector<bool> values(static_cast<size_t>(flags.size()));
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = host.element<bool>(static_cast<int64_t>(i));
  return values;
}

nlohmann::json number_or_text(double value) {
  return std::isfinite(value) ? nlohmann::json(value) : nlohmann::json(fmt::format("{}", value));
}

// A step whose metrics are still on the device.
struct PendingStep {
  int64_t step;   // 1-based
  int64_t epoch;  // 1-based
  int64_t batch_size;
  StepMetrics metrics;
  double data_wait_seconds = 0;  // how long the loader kept the step waiting for its batch
};

// Running totals of one epoch's training metrics.
struct EpochTotals {
  double loss_sum = 0;  // sum of batch-mean losses
  int64_t batches = 0;
  int64_t correct = 0;
  int64_t examples = 0;
  double mean_loss() const { return batches ? loss_sum / static_cast<double>(batches) : 0; }
  double accuracy() const {
    return examples ? static_cast<double>(correct) / static_cast<double>(examples) : 0;
  }
};

struct EvalResult {
  double loss = 0;
  double accuracy = 0;
};

EvalResult evaluate(const EvalStep& eval, const TrainState& state,
                    const data::BatchAssembler& batches) {
  double loss_sum = 0;
  int64_t correct = 0;
  data::HostBatch host;
  for (int64_t index = 0; index < batches.batches_per_epoch(); ++index) {
    batches.assemble(0, index, host);
    Batch batch = to_arrays(host);
    EvalSums sums = eval.run(state, batch.images, batch.labels);
    loss_sum += sums.loss_sum.item<double>();
    correct += sums.correct.item<int64_t>();
  }
  // load_dataset refuses an empty split, so count > 0.
  auto count = static_cast<double>(batches.sampler().num_records());
  return EvalResult{loss_sum / count, static_cast<double>(correct) / count};
}

// The classifier must map an image to 10 logits; say so before any work starts.
void check_model_output(const nn::Module& model, const AbstractValue& input, int64_t classes) {
  AbstractValue output = model.output_type(input);
  if (output.shape.rank() != 2 || output.shape[1] != classes) {
    fail(kUnknownSite,
         fmt::format("model: the last layer must give {} logits per example (f32[batch,{}]); "
                     "the layers give {} for input {}",
                     classes, classes, output.to_string(), input.to_string()),
         fmt::format("end [[model.layers]] with a dense layer of features = {}", classes));
  }
}

// Leaf indices in the order the backward pass produces their gradients: Sequential runs
// its layers backwards, so the last layer (the highest <kind>_<position>) comes first; in
// a layer, the parameter applied last (a bias, after the kernel or scale) comes first,
// which is also the alphabetical order of the names kiln gives them.
std::vector<size_t> backward_order(const std::vector<std::string>& paths) {
  auto position = [](const std::string& path) -> int64_t {
    std::string layer = path.substr(0, path.find('/'));
    size_t underscore = layer.rfind('_');
    if (underscore == std::string::npos) return -1;
    try {
      return std::stoll(layer.substr(underscore + 1));
    } catch (...) {
      return -1;
    }
  };
  std::vector<size_t> order(paths.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    int64_t pa = position(paths[a]), pb = position(paths[b]);
    return pa != pb ? pa > pb : paths[a] < paths[b];
  });
  return order;
}

// The state after the last epoch whose evaluation was finite, kept (by reference, the
// arrays are immutable) so that a run failing later still leaves usable weights.
struct GoodState {
  Tree params;
  Tree model_state;
  int64_t epoch = 0;
  int64_t step = 0;
};

class Run {
 public:
  Run(const TrainConfig& config, const TrainOptions& options)
      : config_(config), options_(options), start_(Clock::now()) {}

  TrainSummary execute();

 private:
  void prepare();
  void start_run_directory();
  void train_epochs();
  void process(const PendingStep& pending);
  void report_nonfinite(const PendingStep& pending, double loss, const std::vector<bool>& flags);
  void end_epoch(int64_t epoch, int64_t step_number, const EvalStep& eval);
  void stop_if_asked(int64_t step_number, std::deque<PendingStep>& pending);
  void save_final();
  void keep_last_good_state();
  void print(std::string_view text) const {
    if (!options_.quiet) print_best_effort(stdout, text);
  }

  const TrainConfig& config_;
  const TrainOptions& options_;
  Clock::time_point start_;
  std::optional<RunData> data_;
  std::optional<nn::Module> model_;
  std::optional<optim::GradientTransformation> optimizer_;
  AbstractValue input_;
  std::optional<RunDirectory> run_;
  std::optional<Progress> progress_;
  std::vector<std::string> param_paths_;
  std::vector<size_t> backward_order_;
  TrainState state_;
  std::optional<GoodState> last_good_;
  TrainSummary summary_;
  EpochTotals epoch_totals_;
  int64_t total_steps_ = 0;
  std::optional<Clock::time_point> last_completion_;
  std::vector<double> step_seconds_;
  std::vector<double> data_wait_seconds_;  // per step, from the second on
  std::deque<double> recent_rates_;        // samples/s of the latest steps
};

// Everything before the run directory: the data, the model and its checks, the schedule,
// the initial state. An error here leaves nothing on disk.
void Run::prepare() {
  const TrainConfig& c = config_;
  Array root = random::key(c.experiment.seed);
  data_.emplace(c, random::fold_in(root, 3));
  const data::Dataset& dataset = data_->dataset;
  total_steps_ = planned_steps(c.train, dataset.train.size(), data_->train->batches_per_epoch());

  model_.emplace(build_model(c.model));
  std::vector<int64_t> input_shape = {1};
  for (int64_t dim : data::example_input_shape(dataset.record_shape)) input_shape.push_back(dim);
  input_ = AbstractValue(Shape{std::span<const int64_t>(input_shape)}, DType::f32);
  check_model_output(*model_, input_, dataset.num_classes);
  check_layers(c, input_, dataset.train.size(), total_steps_);
  check_schedule_range(c.optim, total_steps_);
  optimizer_.emplace(build_optimizer(c.optim, total_steps_));

  nn::Variables variables = model_->init(random::fold_in(root, 0), input_);
  state_ = TrainState{variables.params, variables.state, optimizer_->init(variables.params)};
  for (const auto& [path, leaf] : state_.params.leaves_with_paths()) param_paths_.push_back(path);
  backward_order_ = backward_order(param_paths_);
}

void Run::start_run_directory() {
  const TrainConfig& c = config_;
  std::string resolved = to_toml(c);
  print(
      fmt::format("# resolved config ({})\n{}\n{}\n", c.source, resolved, model_->summary(input_)));
  nlohmann::json dataset = data_->dataset.to_json();
  dataset["name"] = c.data.dataset;
  nlohmann::json info = {{"seed", c.experiment.seed},
                         {"config_file", c.source},
                         {"dataset", dataset},
                         {"parameters", nn::parameter_count(state_.params)},
                         {"total_steps", total_steps_},
                         {"compute_threads", default_device().compute_threads()},
                         // Settings outside the config that change the weights' bits.
                         {"kernels", configured_kernels()},
                         {"kiln_version", "0.1.0"}};
  run_.emplace(RunDirectory::create(c.experiment.runs_dir, c.experiment.name, resolved, info));
  summary_.run_dir = run_->path();
  summary_.crashed_runs = run_->crashed_runs();
  for (const fs::path& crashed : summary_.crashed_runs) {
    print(fmt::format("marked {} as crashed (its process is gone; run.json said running)\n",
                      crashed.string()));
  }
  print(fmt::format("run directory: {}\n", run_->path().string()));
}

TrainSummary Run::execute() {
  prepare();
  if (options_.stop_signal && options_.stop_signal->load() != 0) {
    int signal = options_.stop_signal->load();
    throw InterruptedError(signal, 0, {},
                           fmt::format("interrupted by {} before the run started; nothing was "
                                       "written",
                                       signal_name(signal)));
  }
  start_run_directory();
  Progress::Mode mode = options_.quiet         ? Progress::Mode::kSilent
                        : options_.interactive ? Progress::Mode::kBar
                                               : Progress::Mode::kLines;
  progress_.emplace(mode, config_.train.log_every);
  try {
    train_epochs();
    save_final();
  } catch (const InterruptedError& interrupted) {
    progress_->finish();
    keep_last_good_state();
    std::string problem =
        run_->finish_interrupted(signal_name(interrupted.signal()), interrupted.steps());
    if (!problem.empty()) progress_->message("warning: run.json not updated: " + problem);
    throw;
  } catch (const std::exception& error) {
    progress_->finish();
    keep_last_good_state();
    std::string problem = run_->finish_failed(error.what());
    if (!problem.empty()) progress_->message("warning: run.json not updated: " + problem);
    throw;
  }
  return summary_;
}

void Run::train_epochs() {
  const TrainConfig& c = config_;
  Array root = random::key(c.experiment.seed);
  Array dropout_key = random::fold_in(root, 2);
  StepOptions step_options;
  step_options.skip_nonfinite = c.train.on_nonfinite == "skip";
  step_options.flush_denormals = c.train.flush_denormals;
  TrainStep step(*model_, *optimizer_, step_options);
  EvalStep eval(*model_, c.train.flush_denormals);
  std::deque<PendingStep> pending;
  int64_t step_number = 0;
  // Workers assemble the next batches while the device runs the step.
  data::Loader loader(*data_->train, data_->loader_options);
  Clock::time_point loop_start = Clock::now();
  for (int64_t epoch = 1; epoch <= c.train.epochs && step_number < total_steps_; ++epoch) {
    epoch_totals_ = EpochTotals{};
    for (int64_t index = 0; index < data_->train->batches_per_epoch() && step_number < total_steps_;
         ++index) {
      const data::HostBatch& host = loader.next();
      KILN_CHECK(host.epoch == epoch - 1 && host.index == index);
      Batch batch = to_arrays(host);
      ++step_number;
      Array key = random::fold_in(dropout_key, static_cast<uint32_t>(step_number));
      StepMetrics metrics = step.run(state_, batch.images, batch.labels, key);
      pending.push_back(PendingStep{step_number, epoch, batch.labels.dim(0), metrics,
                                    loader.last_wait_seconds()});
      // Read the previous step's metrics only now: the step just queued keeps the
      // device busy while the host waits.
      if (pending.size() > 1) {
        process(pending.front());
        pending.pop_front();
      }
      stop_if_asked(step_number, pending);
    }
    while (!pending.empty()) {
      process(pending.front());
      pending.pop_front();
    }
    end_epoch(epoch, step_number, eval);
  }
  progress_->finish();
  summary_.steps = step_number;
  summary_.seconds = seconds_since(start_);
  summary_.median_step_ms = 1e3 * profile::summarize(0, step_seconds_).median_s;
  double loop_seconds = seconds_since(loop_start);
  run_->info()["data_wait"] = {
      {"total_seconds", loader.total_wait_seconds()},
      {"fraction_of_training", loop_seconds > 0 ? loader.total_wait_seconds() / loop_seconds : 0},
      {"median_ms", 1e3 * profile::summarize(0, data_wait_seconds_).median_s},
      {"starved_steps", loader.starved_calls()},
      {"workers", data_->loader_options.workers},
      {"prefetch", data_->loader_options.prefetch}};
  JitStats stats = step.stats();
  run_->info()["jit"] = {{"compiles", stats.compiles},
                         {"compile_seconds", stats.compile_seconds},
                         {"compile_reasons", stats.compile_reasons}};
}

// Between steps: a stop request ends the run once the steps queued so far are recorded.
void Run::stop_if_asked(int64_t step_number, std::deque<PendingStep>& pending) {
  if (!options_.stop_signal) return;
  int signal = options_.stop_signal->load();
  if (signal == 0) return;
  while (!pending.empty()) {
    process(pending.front());
    pending.pop_front();
  }
  throw InterruptedError(
      signal, step_number, run_->path(),
      fmt::format("interrupted by {} after step {} of {}; run.json says interrupted",
                  signal_name(signal), step_number, total_steps_));
}

void Run::end_epoch(int64_t epoch, int64_t step_number, const EvalStep& eval) {
  const TrainConfig& c = config_;
  EvalResult test = evaluate(eval, state_, *data_->test);
  summary_.test_accuracy = test.accuracy;
  summary_.test_loss = test.loss;
  summary_.train_loss = epoch_totals_.mean_loss();
  run_->append_metrics({{"kind", "eval"},
                        {"epoch", epoch},
                        {"step", step_number},
                        {"train_loss", epoch_totals_.mean_loss()},
                        {"train_accuracy", epoch_totals_.accuracy()},
                        {"test_loss", number_or_text(test.loss)},
                        {"test_accuracy", test.accuracy}});
  if (!std::isfinite(test.loss)) {
    // Skipped steps keep the weights finite, but a loss can still overflow: such weights
    // are no result.
    throw NonFiniteError(fmt::format(
        "epoch {} (step {}): the test loss is {}; the weights do not give finite results{}", epoch,
        step_number, test.loss,
        summary_.skipped_steps
            ? fmt::format(" ({} steps were skipped as non-finite)", summary_.skipped_steps)
            : ""));
  }
  last_good_ = GoodState{state_.params, state_.model_state, epoch, step_number};
  progress_->message(fmt::format(
      "epoch {}/{}: train loss {:.4f} acc {:.2f}%  |  test loss {:.4f} acc {:.2f}%  |  {}", epoch,
      c.train.epochs, epoch_totals_.mean_loss(), 100 * epoch_totals_.accuracy(), test.loss,
      100 * test.accuracy, format_duration(seconds_since(start_))));
}

void Run::process(const PendingStep& pending) {
  const StepMetrics& m = pending.metrics;
  double loss = m.loss.item<double>();
  int64_t correct = m.correct.item<int64_t>();
  double lr = m.lr.item<double>();
  std::vector<bool> nonfinite = host_bools(m.nonfinite);
  Clock::time_point now = Clock::now();
  if (pending.step == 1) {
    summary_.first_step_seconds = options_.process_start_age_seconds + seconds_since(start_);
    run_->info()["first_step_seconds"] = summary_.first_step_seconds;
  } else if (last_completion_) {
    double seconds = std::chrono::duration<double>(now - *last_completion_).count();
    step_seconds_.push_back(seconds);
    data_wait_seconds_.push_back(pending.data_wait_seconds);
    recent_rates_.push_back(static_cast<double>(pending.batch_size) / seconds);
    if (recent_rates_.size() > 20) recent_rates_.pop_front();
  }
  last_completion_ = now;

  bool bad_gradient = std::find(nonfinite.begin(), nonfinite.end(), true) != nonfinite.end();
  if (!std::isfinite(loss) || bad_gradient) {
    report_nonfinite(pending, loss, nonfinite);
    return;
  }
  epoch_totals_.loss_sum += loss;
  epoch_totals_.batches += 1;
  epoch_totals_.correct += correct;
  epoch_totals_.examples += pending.batch_size;
  double rate = 0;
  for (double r : recent_rates_) rate += r;
  if (!recent_rates_.empty()) rate /= static_cast<double>(recent_rates_.size());
  double step_seconds = step_seconds_.empty() ? 0 : step_seconds_.back();
  run_->append_metrics(
      {{"kind", "train"},
       {"step", pending.step},
       {"epoch", pending.epoch},
       {"loss", loss},
       {"accuracy", static_cast<double>(correct) / static_cast<double>(pending.batch_size)},
       {"lr", lr},
       {"step_ms", 1e3 * step_seconds},
       {"data_wait_ms", 1e3 * pending.data_wait_seconds}});
  StepProgress p;
  p.step = pending.step;
  p.total_steps = total_steps_;
  p.epoch = pending.epoch;
  p.epochs = config_.train.epochs;
  p.loss = epoch_totals_.mean_loss();
  p.accuracy = epoch_totals_.accuracy();
  p.samples_per_second = rate;
  p.data_wait_ms = 1e3 * pending.data_wait_seconds;
  double batch = static_cast<double>(config_.train.batch_size);
  p.eta_seconds = rate > 0 ? static_cast<double>(total_steps_ - pending.step) * batch / rate : -1;
  progress_->update(p);
}

// A step with a non-finite loss or gradient: recorded, then stopped or skipped.
void Run::report_nonfinite(const PendingStep& pending, double loss,
                           const std::vector<bool>& flags) {
  std::vector<std::string> bad;
  for (size_t leaf : backward_order_) {
    if (flags[leaf]) bad.push_back(param_paths_[leaf]);
  }
  std::string where =
      bad.empty() ? "none (the loss alone)"
                  : fmt::format("{} (in backward order: the last layer's first)", bad.front());
  bool skip = config_.train.on_nonfinite == "skip";
  std::string text = fmt::format("step {} (epoch {}): loss is {}; first non-finite gradient: {}",
                                 pending.step, pending.epoch, loss, where);
  run_->append_metrics({{"kind", "nonfinite"},
                        {"step", pending.step},
                        {"epoch", pending.epoch},
                        {"loss", number_or_text(loss)},
                        {"first_nonfinite_gradient", bad.empty() ? "" : bad.front()},
                        {"nonfinite_gradients", bad},
                        {"action", skip ? "skipped" : "stopped"}});
  if (!skip) {
    throw NonFiniteError(text + " (set train.on_nonfinite = \"skip\" to skip such steps)");
  }
  ++summary_.skipped_steps;
  progress_->message("skipped " + text);
  if (summary_.skipped_steps > config_.train.max_skipped_steps) {
    throw NonFiniteError(fmt::format(
        "{} steps were skipped as non-finite, more than train.max_skipped_steps = {}; the last: "
        "{}",
        summary_.skipped_steps, config_.train.max_skipped_steps, text));
  }
}

// A run that fails or is interrupted after a good epoch keeps that epoch's weights, under
// names that cannot be taken for a finished run's. Best effort: the disk may be full.
void Run::keep_last_good_state() {
  if (!last_good_ || !run_) return;
  std::map<std::string, std::string> metadata = {{"format", "kiln params"},
                                                 {"experiment", config_.experiment.name},
                                                 {"epoch", std::to_string(last_good_->epoch)},
                                                 {"steps", std::to_string(last_good_->step)}};
  nlohmann::json record = {{"epoch", last_good_->epoch}, {"step", last_good_->step}};
  try {
    save_safetensors(run_->path() / "last_good.params.safetensors", last_good_->params, metadata);
    record["params_file"] = "last_good.params.safetensors";
    if (last_good_->model_state.num_leaves() > 0) {
      save_safetensors(run_->path() / "last_good.state.safetensors", last_good_->model_state,
                       metadata);
      record["state_file"] = "last_good.state.safetensors";
    }
  } catch (const std::exception& error) {
    record["error"] = error.what();
  }
  run_->info()["last_good"] = record;
}

void Run::save_final() {
  std::map<std::string, std::string> metadata = {{"format", "kiln params"},
                                                 {"experiment", config_.experiment.name},
                                                 {"steps", std::to_string(summary_.steps)}};
  fs::path params_path = run_->path() / "params.safetensors";
  save_safetensors(params_path, state_.params, metadata);
  summary_.params_sha256 = io::sha256_file(params_path);
  nlohmann::json& info = run_->info();
  info["params_file"] = "params.safetensors";
  info["params_sha256"] = summary_.params_sha256;
  if (state_.model_state.num_leaves() > 0) {
    save_safetensors(run_->path() / "state.safetensors", state_.model_state, metadata);
    info["state_file"] = "state.safetensors";
  }
  info["steps"] = summary_.steps;
  info["skipped_steps"] = summary_.skipped_steps;
  info["seconds"] = summary_.seconds;
  info["median_step_ms"] = summary_.median_step_ms;
  info["final"] = {{"test_accuracy", summary_.test_accuracy},
                   {"test_loss", summary_.test_loss},
                   {"train_loss", summary_.train_loss}};
  last_good_.reset();  // the final weights are written: nothing else to keep
  run_->finish_completed();
}

}  // namespace

std::string signal_name(int signal) {
  if (signal == SIGINT) return "SIGINT";
  if (signal == SIGTERM) return "SIGTERM";
  return fmt::format("signal {}", signal);
}

TrainSummary train(const TrainConfig& config, const TrainOptions& options) {
  return Run(config, options).execute();
}

}  // namespace kiln::train
