// The training run: data, model, optimizer, run directory, the step loop, evaluation,
// and the final weights.
#include "train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "data/idx.h"
#include "io/sha256.h"
#include "kiln/device.h"
#include "kiln/nn/module.h"
#include "kiln/profile.h"
#include "kiln/random.h"
#include "kiln/safetensors.h"
#include "train/batches.h"
#include "train/builders.h"
#include "train/progress.h"
#include "train/run_directory.h"
#include "train/train_step.h"

namespace kiln::train {
namespace {

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

// A step whose metrics are still on the device.
struct PendingStep {
  int64_t step;   // 1-based
  int64_t epoch;  // 1-based
  int64_t batch_size;
  StepMetrics metrics;
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

EvalResult evaluate(const EvalStep& eval, const TrainState& state, ImageBatches& batches) {
  double loss_sum = 0;
  int64_t correct = 0;
  for (int64_t index = 0; index < batches.batches_per_epoch(); ++index) {
    Batch batch = batches.batch(index);
    EvalSums sums = eval.run(state, batch.images, batch.labels);
    loss_sum += sums.loss_sum.item<double>();
    correct += sums.correct.item<int64_t>();
  }
  auto count = static_cast<double>(batches.num_examples());
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

class Run {
 public:
  Run(const TrainConfig& config, const TrainOptions& options)
      : config_(config), options_(options), start_(Clock::now()) {}

  TrainSummary execute();

 private:
  void process(const PendingStep& pending);
  void end_epoch(int64_t epoch);
  void save_final();

  const TrainConfig& config_;
  const TrainOptions& options_;
  Clock::time_point start_;
  std::optional<RunDirectory> run_;
  std::optional<Progress> progress_;
  std::vector<std::string> param_paths_;
  TrainState state_;
  TrainSummary summary_;
  EpochTotals epoch_totals_;
  int64_t total_steps_ = 0;
  std::optional<Clock::time_point> last_completion_;
  std::vector<double> step_seconds_;
  std::deque<double> recent_rates_;  // samples/s of the latest steps
};

TrainSummary Run::execute() {
  const TrainConfig& c = config_;
  data::FashionMnist dataset =
      data::load_fashion_mnist(c.data.dir, c.data.train_limit, c.data.test_limit);
  ImageBatches train_batches(dataset.train, c.train.batch_size);
  ImageBatches test_batches(dataset.test, c.train.eval_batch_size);

  nn::Module model = build_model(c.model);
  AbstractValue input(Shape{1, dataset.train.images.dims.at(1), dataset.train.images.dims.at(2), 1},
                      DType::f32);
  check_model_output(model, input, dataset.num_classes);

  total_steps_ = c.train.epochs * train_batches.batches_per_epoch();
  if (c.train.max_steps > 0) total_steps_ = std::min(total_steps_, c.train.max_steps);
  optim::GradientTransformation optimizer = build_optimizer(c.optim, total_steps_);

  Array root = random::key(c.experiment.seed);
  nn::Variables variables = model.init(random::fold_in(root, 0), input);
  Array data_key = random::fold_in(root, 1);
  Array dropout_key = random::fold_in(root, 2);
  state_ = TrainState{variables.params, variables.state, optimizer.init(variables.params)};
  for (const auto& [path, leaf] : state_.params.leaves_with_paths()) param_paths_.push_back(path);

  std::string resolved = to_toml(c);
  if (!options_.quiet) {
    fmt::print("# resolved config ({})\n{}\n{}\n", c.source, resolved, model.summary(input));
  }
  nlohmann::json info = {{"seed", c.experiment.seed},
                         {"config_file", c.source},
                         {"dataset",
                          {{"name", c.data.dataset},
                           {"dir", c.data.dir},
                           {"train_examples", train_batches.num_examples()},
                           {"test_examples", test_batches.num_examples()}}},
                         {"parameters", nn::parameter_count(state_.params)},
                         {"total_steps", total_steps_},
                         {"compute_threads", default_device().compute_threads()},
                         {"kiln_version", "0.1.0"}};
  run_.emplace(RunDirectory::create(c.experiment.runs_dir, c.experiment.name, resolved, info));
  summary_.run_dir = run_->path();
  if (!options_.quiet) fmt::print("run directory: {}\n", run_->path().string());
  Progress::Mode mode = options_.quiet         ? Progress::Mode::kSilent
                        : options_.interactive ? Progress::Mode::kBar
                                               : Progress::Mode::kLines;
  progress_.emplace(mode, c.train.log_every);

  try {
    StepOptions step_options;
    step_options.skip_nonfinite = c.train.on_nonfinite == "skip";
    step_options.flush_denormals = c.train.flush_denormals;
    TrainStep step(model, optimizer, step_options);
    EvalStep eval(model, c.train.flush_denormals);
    std::deque<PendingStep> pending;
    int64_t step_number = 0;
    for (int64_t epoch = 1; epoch <= c.train.epochs && step_number < total_steps_; ++epoch) {
      epoch_totals_ = EpochTotals{};
      train_batches.shuffle(data_key, epoch - 1);
      for (int64_t index = 0;
           index < train_batches.batches_per_epoch() && step_number < total_steps_; ++index) {
        Batch batch = train_batches.batch(index);
        ++step_number;
        Array key = random::fold_in(dropout_key, static_cast<uint32_t>(step_number));
        StepMetrics metrics = step.run(state_, batch.images, batch.labels, key);
        pending.push_back(PendingStep{step_number, epoch, batch.labels.dim(0), metrics});
        // Read the previous step's metrics only now: the step just queued keeps the
        // device busy while the host waits.
        if (pending.size() > 1) {
          process(pending.front());
          pending.pop_front();
        }
      }
      while (!pending.empty()) {
        process(pending.front());
        pending.pop_front();
      }
      EvalResult test = evaluate(eval, state_, test_batches);
      summary_.test_accuracy = test.accuracy;
      summary_.test_loss = test.loss;
      summary_.train_loss = epoch_totals_.mean_loss();
      run_->append_metrics({{"kind", "eval"},
                            {"epoch", epoch},
                            {"step", step_number},
                            {"train_loss", epoch_totals_.mean_loss()},
                            {"train_accuracy", epoch_totals_.accuracy()},
                            {"test_loss", test.loss},
                            {"test_accuracy", test.accuracy}});
      progress_->message(fmt::format(
          "epoch {}/{}: train loss {:.4f} acc {:.2f}%  |  test loss {:.4f} acc {:.2f}%  |  {}",
          epoch, c.train.epochs, epoch_totals_.mean_loss(), 100 * epoch_totals_.accuracy(),
          test.loss, 100 * test.accuracy, format_duration(seconds_since(start_))));
    }
    progress_->finish();
    summary_.steps = step_number;
    summary_.seconds = seconds_since(start_);
    summary_.median_step_ms = 1e3 * profile::summarize(0, step_seconds_).median_s;
    JitStats stats = step.stats();
    run_->info()["jit"] = {{"compiles", stats.compiles},
                           {"compile_seconds", stats.compile_seconds},
                           {"compile_reasons", stats.compile_reasons}};
    save_final();
  } catch (const std::exception& error) {
    if (progress_) progress_->finish();
    run_->finish_failed(error.what());
    throw;
  }
  return summary_;
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
    recent_rates_.push_back(static_cast<double>(pending.batch_size) / seconds);
    if (recent_rates_.size() > 20) recent_rates_.pop_front();
  }
  last_completion_ = now;

  auto bad = std::find(nonfinite.begin(), nonfinite.end(), true);
  if (!std::isfinite(loss) || bad != nonfinite.end()) {
    std::string where = "none (the loss alone)";
    if (bad != nonfinite.end()) {
      size_t leaf = static_cast<size_t>(bad - nonfinite.begin());
      where = param_paths_[leaf];
    }
    bool skip = config_.train.on_nonfinite == "skip";
    std::string text = fmt::format("step {} (epoch {}): loss is {}; first non-finite gradient: {}",
                                   pending.step, pending.epoch, loss, where);
    run_->append_metrics(
        {{"kind", "nonfinite"},
         {"step", pending.step},
         {"epoch", pending.epoch},
         {"loss",
          std::isfinite(loss) ? nlohmann::json(loss) : nlohmann::json(fmt::format("{}", loss))},
         {"first_nonfinite_gradient",
          bad != nonfinite.end() ? param_paths_[static_cast<size_t>(bad - nonfinite.begin())] : ""},
         {"action", skip ? "skipped" : "stopped"}});
    if (!skip) {
      throw NonFiniteError(text + " (set train.on_nonfinite = \"skip\" to skip such steps)");
    }
    ++summary_.skipped_steps;
    progress_->message("skipped " + text);
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
       {"step_ms", 1e3 * step_seconds}});
  StepProgress p;
  p.step = pending.step;
  p.total_steps = total_steps_;
  p.epoch = pending.epoch;
  p.epochs = config_.train.epochs;
  p.loss = epoch_totals_.mean_loss();
  p.accuracy = epoch_totals_.accuracy();
  p.samples_per_second = rate;
  double batch = static_cast<double>(config_.train.batch_size);
  p.eta_seconds = rate > 0 ? static_cast<double>(total_steps_ - pending.step) * batch / rate : -1;
  progress_->update(p);
}

void Run::save_final() {
  std::map<std::string, std::string> metadata = {{"format", "kiln params"},
                                                 {"experiment", config_.experiment.name},
                                                 {"steps", std::to_string(summary_.steps)}};
  std::filesystem::path params_path = run_->path() / "params.safetensors";
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
  run_->finish_completed();
}

}  // namespace

TrainSummary train(const TrainConfig& config, const TrainOptions& options) {
  return Run(config, options).execute();
}

}  // namespace kiln::train
