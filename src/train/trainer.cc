// The training run: data, model, optimizer, checks, run directory, the step loop,
// evaluation, and the final weights.
#include "train/trainer.h"

#include <csignal>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <fstream>
#include <map>
#include <numeric>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "base/byte_size.h"
#include "base/check.h"
#include "dist/processes.h"
#include "io/atomic_file.h"
#include "io/bounded_read.h"
#include "io/json_fields.h"
#include "io/json_text.h"
#include "io/savepoint.h"
#include "io/savepoint_writer.h"
#include "io/sha256.h"
#include "kiln/device.h"
#include "kiln/error.h"
#include "kiln/nn/module.h"
#include "kiln/profile.h"
#include "kiln/random.h"
#include "kiln/safetensors.h"
#include "runtime/device_array.h"
#include "runtime/runtime.h"
#include "track/report.h"
#include "track/run_environment.h"
#include "train/batches.h"
#include "train/builders.h"
#include "train/evaluation.h"
#include "train/layer_telemetry.h"
#include "train/memory_fit.h"
#include "train/precision.h"
#include "train/private_training.h"
#include "train/progress.h"
#include "train/rank_agreement.h"
#include "train/resume_point.h"
#include "train/run_checks.h"
#include "train/run_directory.h"
#include "train/run_identity.h"
#include "train/run_tracking.h"
#include "train/startup_times.h"
#include "train/train_savepoint.h"
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

// train.loss_scale and its keys as the step takes them.
LossScaleOptions loss_scale_options_of(const TrainConfig& c) {
  LossScaleOptions options;
  options.mode = resolved_loss_scale(c);
  options.initial = c.train.loss_scale_initial;
  options.growth_interval = c.train.loss_scale_growth_interval;
  options.backoff = c.train.loss_scale_backoff;
  options.growth = c.train.loss_scale_growth;
  return options;
}

// A section of run.json (track::RunInfo::sections): a report written whole, read only for
// display.
void set_section(track::RunInfo& info, const std::string& name, const nlohmann::json& value) {
  info.sections[name] = io::json_text(value);
}

// run.json's "memory_budget": the budget, every plan tried with its planned peak, the choice.
nlohmann::json memory_fit_json(const MemoryFit& fit) {
  nlohmann::json plans = nlohmann::json::array();
  for (const MemoryCandidate& c : fit.tried) {
    nlohmann::json plan = {{"accumulate", c.accumulate}, {"batch_size", c.batch_size}};
    if (!c.remat.empty()) plan["remat"] = c.remat;
    if (c.not_possible.empty()) {
      plan["planned_peak_bytes"] = c.planned_peak_bytes;
    } else {
      plan["not_possible"] = c.not_possible;
    }
    plans.push_back(plan);
  }
  nlohmann::json evaluation = nlohmann::json::array();
  for (const EvalCandidate& e : fit.eval_tried) {
    evaluation.push_back(
        {{"eval_batch_size", e.eval_batch_size}, {"planned_peak_bytes", e.planned_peak_bytes}});
  }
  return {{"budget_bytes", fit.budget_bytes},
          {"plans", plans},
          {"chosen", static_cast<int64_t>(fit.tried.size()) - 1},
          {"evaluation", evaluation}};
}

// The startup breakdown as [[phase, seconds], ...], in order.
nlohmann::json startup_json(const StartupTimes& startup) {
  nlohmann::json phases = nlohmann::json::array();
  for (const auto& [name, seconds] : startup.phases()) phases.push_back({name, seconds});
  return phases;
}

// A step whose metrics are still on the device.
struct PendingStep {
  int64_t step;   // 1-based
  int64_t epoch;  // 1-based
  int64_t batch_size;
  StepMetrics metrics;
  double data_wait_seconds = 0;  // how long the loader kept the step waiting for its batch
  // With TrainOptions::debug_nonfinite: runs the step again from its inputs, one primitive
  // at a time, naming the first equation that made a NaN or an infinity.
  std::function<NonFiniteOrigin()> explain_nonfinite = {};
};

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

// What resume() found before the run starts again.
struct ResumePlan {
  std::filesystem::path run_dir;
  track::RunInfo info;  // run.json
  const ResumeOptions* options = nullptr;
};

// The step's options, from the config and the MPI job.
StepOptions step_options_of(const TrainConfig& c, bool keep_inputs);

class Run {
 public:
  Run(const TrainConfig& config, const TrainOptions& options, const ResumePlan* resume = nullptr)
      : written_config_(config),
        config_(update_config(config)),
        options_(options),
        resume_(resume),
        start_(Clock::now()),
        startup_(options.process_start_age_seconds, options.config_seconds) {}

  TrainSummary execute();

 private:
  void prepare();
  // train.memory_budget on a fresh run: the plan whose step fits, in the written config
  // and the steps' config (memory_fit.h).
  void fit_memory_budget(const Array& init_key);
  void start_run_directory();
  void reopen_run_directory();
  void agree_on_resume_step() const;
  // Rank 0 of a resume: the run directory reopened, tracking told.
  void reopen_as_writer(track::RunInfo info, int64_t metrics_lines, bool identity_changed);
  void start_savepoints();
  bool savepoint_due(int64_t step_number) const;
  // Writes a savepoint of the state after `step_number` (the steps queued are recorded
  // first); `wait` writes it before returning, else in the background when configured.
  void save_savepoint(int64_t step_number, DataPosition data, std::deque<PendingStep>& pending,
                      bool wait);
  // Reports the background saves that finished: a failure stops the run or is recorded,
  // as train.on_savepoint_error says.
  void check_savepoints();
  void savepoint_failed(int64_t step, const std::string& error);
  void train_epochs();
  void train_epoch(int64_t epoch, int64_t first_batch, TrainStep& step, data::Loader& loader,
                   std::deque<PendingStep>& pending, int64_t& step_number);
  void record_loop_reports(const TrainStep& step, const data::Loader& loader, double loop_seconds,
                           int64_t step_number);
  void process(const PendingStep& pending);
  void time_step(const PendingStep& pending);
  void show_progress(const PendingStep& pending);
  void report_nonfinite(const PendingStep& pending, double loss, const std::vector<bool>& flags);
  // [telemetry]: the layers' statistics before step `step_number`, on its batch and state.
  void record_telemetry(int64_t step_number, int64_t epoch, const Batch& batch, const Array& key);
  // A step whose gradient overflowed the dynamic loss scale: skipped, the scale backed off.
  void report_overflow(const PendingStep& pending, double loss, double scale,
                       const std::vector<bool>& flags);
  // The parameters whose gradient has non-finite elements, in backward order.
  std::vector<std::string> nonfinite_paths(const std::vector<bool>& flags) const;
  // run.json's "loss_scale" (dynamic loss scaling): the settings, the overflows, the scale
  // now (read from the device: at the end of the run only).
  void record_loss_scale();
  void end_epoch(int64_t epoch, int64_t step_number, const EvalStep& eval);
  void stop_if_asked(int64_t step_number, DataPosition next, std::deque<PendingStep>& pending);
  void save_final();
  void keep_last_good_state();
  // run.json's "timing": the figures of docs/profiling.md's timing report.
  nlohmann::json timing_report(const JitStats& stats, double loop_seconds, double data_wait_seconds,
                               double syncs_per_step) const;
  // run.json's "roofline", "memory" and "trace", once the profiled window has run.
  void record_profile();
  // <run dir>/report.html (docs/profiling.md); a failure is a warning.
  void write_report();
  // Waits for the trackers (bounded) and records what they could not send.
  void finish_tracking();
  void print(std::string_view text) const {
    if (!options_.quiet && writes_) print_best_effort(stdout, text);
  }

  // The config as written (the run identity, config.toml) and as the steps run it
  // (update_config: gradient accumulation resolved into one batch per update). A memory
  // budget changes both once, in prepare(), before anything reads them.
  TrainConfig written_config_;
  TrainConfig config_;
  std::optional<MemoryFit> memory_fit_;
  const TrainOptions& options_;
  const ResumePlan* resume_;
  Clock::time_point start_;
  std::optional<RunData> data_;
  std::optional<nn::Module> model_;
  std::optional<optim::GradientTransformation> optimizer_;
  AbstractValue input_;
  int64_t labels_per_example_ = 1;       // a language model's context: a label per token
  std::optional<RunTracking> tracking_;  // observes run_, so declared (and outlives it) first
  std::optional<RunDirectory> run_;
  std::optional<Progress> progress_;
  std::optional<StepProfiler> profiler_;
  std::optional<LayerTelemetry> telemetry_;  // [telemetry] every > 0, a sequential model
  std::optional<PrivacyPlan> privacy_;       // [privacy] enabled
  int64_t truncated_examples_ = 0;           // Poisson draws that found no row, this process
  StartupTimes startup_;
  std::vector<std::string> param_paths_;
  std::vector<size_t> backward_order_;
  LossScaleOptions loss_scale_;
  TrainState state_;
  std::optional<GoodState> last_good_;
  TrainSummary summary_;
  EpochTotals epoch_totals_;
  int64_t total_steps_ = 0;
  std::optional<Clock::time_point> last_completion_;
  std::vector<double> step_seconds_;
  std::vector<double> data_wait_seconds_;  // per step, from the second on
  std::deque<double> recent_rates_;        // samples/s of the latest steps
  // Savepoints.
  RunIdentity identity_;
  RunKeys keys_;
  int64_t start_step_ = 0;
  DataPosition start_position_;  // where the first epoch of this process starts
  SavedCounters resumed_counters_;
  std::optional<savepoint::AsyncWriter> writer_;
  Clock::time_point last_savepoint_at_;
  nlohmann::json savepoint_errors_ = nlohmann::json::array();
  double savepoint_thread_seconds_ = 0;  // the training thread's time in save_savepoint
  int64_t savepoints_started_ = 0;
  // Host synchronizations after the first step: all, and those of evaluations and of the
  // savepoints' copies of the state (reported apart from the steps').
  int64_t syncs_after_first_step_ = 0;
  int64_t eval_syncs_ = 0;
  int64_t savepoint_syncs_ = 0;
  bool profiled_ = false;
  // An MPI job: only rank 0 writes the run's files, its catalog entry and its output.
  bool writes_ = dist::rank() == 0;
};

fs::path savepoints_dir(const fs::path& run_dir) {
  return run_dir / "savepoints";
}

// Everything before the run directory: the data, the model and its checks, the schedule,
// the initial state. An error here leaves nothing on disk.
void Run::prepare() {
  const TrainConfig& c = config_;
  // Before anything is read or written: a debug request this run cannot serve.
  if (options_.debug_nonfinite && (c.mesh.data > 0 || dist::active())) {
    fail(kUnknownSite,
         "--debug-nonfinite runs a failing step again on one device; this run's step is on a "
         "mesh or across processes",
         "reproduce the failure without [mesh] and mpirun, then debug it there");
  }
  Array root = random::key(c.experiment.seed);
  Array augment_key = random::fold_in(root, 3);
  data_.emplace(c, augment_key);
  const data::Dataset& dataset = data_->dataset;
  startup_.add_part("data_read", dataset.load_times.read_seconds);
  startup_.add_part("data_checks", dataset.load_times.checks_seconds);
  startup_.add_part("data_identity", dataset.load_times.identity_seconds);
  startup_.end_phase("data_setup");
  total_steps_ = planned_steps(c.train, dataset.train.size(), data_->train->batches_per_epoch());
  if (c.privacy.enabled) {
    if (dist::active()) {
      fail(kUnknownSite,
           "privacy.enabled = true in an MPI job: private training runs in one "
           "process on one device for now",
           "run it without mpirun");
    }
    // An epoch of Poisson batches is as many batches as the ordinary epoch (drop_remainder
    // is refused), so the planned steps are the same.
    privacy_.emplace(plan_privacy(c, dataset.train.size(), total_steps_));
    data_->use_poisson_sampling(privacy_->sampling_rate, privacy_->batch_rows,
                                random::fold_in(root, 4));
    if (!privacy_->warning.empty() && writes_) {
      print_best_effort(stderr, "warning: " + privacy_->warning + "\n");
    }
  }
  std::vector<int64_t> input_shape = {1};
  for (int64_t dim : data::example_input_shape(dataset.record_shape)) input_shape.push_back(dim);
  input_ = AbstractValue(Shape{std::span<const int64_t>(input_shape)}, dataset.input_dtype);
  labels_per_example_ = dataset.train.labels_per_record;
  if (!resume_ && !c.train.memory_budget.empty()) fit_memory_budget(random::fold_in(root, 0));

  model_.emplace(build_model(c.model));
  check_model_output(c.model, *model_, input_, dataset);
  check_layers(c, input_, dataset.train.size(), total_steps_);
  check_mesh_fits(c, dataset.train.size());
  check_schedule_range(c.optim, total_steps_);
  optimizer_.emplace(build_optimizer(c.optim, total_steps_));
  // The budget ends the run early; the schedule stays that of the run as planned.
  if (privacy_ && privacy_->steps_within_budget < total_steps_) {
    print(fmt::format(
        "privacy: privacy.max_epsilon = {} allows {} of the {} planned steps "
        "(epsilon {:.4g} at delta {}); the run stops there\n",
        c.privacy.max_epsilon, privacy_->steps_within_budget, total_steps_,
        privacy_->accountant.after(privacy_->steps_within_budget).epsilon, c.privacy.delta));
    total_steps_ = privacy_->steps_within_budget;
  }

  nn::Variables variables = model_->init(random::fold_in(root, 0), input_);
  if (privacy_ && variables.state.num_leaves() > 0) {
    fail(kUnknownSite,
         fmt::format("{}: privacy.enabled = true with a model that keeps state across steps ({}): "
                     "state computed from a batch mixes its examples",
                     c.source, variables.state.leaves_with_paths().front().first),
         "private models hold parameters only (no batch norm)");
  }
  loss_scale_ = loss_scale_options_of(c);
  state_ = TrainState{variables.params, variables.state, optimizer_->init(variables.params),
                      initial_loss_scale(loss_scale_)};
  // The order of the batches follows from the config's seed (the sampler); the data key
  // recorded is the one the augmentation draws from.
  keys_ = RunKeys{augment_key, random::fold_in(root, 2)};
  identity_ = run_identity(identity_toml(written_config_), dataset.identity, configured_kernels());
  agree_on_identity(identity_);
  for (const auto& [path, leaf] : state_.params.leaves_with_paths()) param_paths_.push_back(path);
  backward_order_ = backward_order(param_paths_);
  startup_.end_phase("model");
}

void Run::fit_memory_budget(const Array& init_key) {
  if (dist::active()) {
    fail(kUnknownSite,
         fmt::format("{}: train.memory_budget in an MPI job: the budget chooses among plans of a "
                     "step in one process",
                     config_.source),
         "run it without mpirun, or set train.accumulate yourself");
  }
  std::optional<int64_t> budget = parse_byte_size(written_config_.train.memory_budget);
  KILN_CHECK(budget.has_value(), "train.memory_budget passed the config's checks");
  const data::Dataset& dataset = data_->dataset;
  // Every plan holds the same parameters and optimizer state (recomputation changes no
  // parameter), so they are made once; each plan's step compiles for the update's batch.
  nn::Module model = build_model(config_.model);
  optim::GradientTransformation optimizer = build_optimizer(config_.optim, total_steps_);
  nn::Variables variables = model.init(init_key, input_);
  TrainState state{variables.params, variables.state, optimizer.init(variables.params),
                   initial_loss_scale(loss_scale_options_of(config_))};
  int64_t state_bytes =
      state.params.size_bytes() + state.model_state.size_bytes() + state.opt_state.size_bytes();
  // A batch of `rows` examples, zeros of the data's types, to compile a plan's steps for; and
  // the bytes of one example (its input and i32 labels, and the f32 mask when batches carry
  // one).
  auto zero_batch = [&](int64_t rows) {
    std::vector<int64_t> images_shape(input_.shape.dims().begin(), input_.shape.dims().end());
    images_shape[0] = rows;
    Batch batch;
    batch.images = zeros(Shape{std::span<const int64_t>(images_shape)}, input_.dtype);
    batch.labels = labels_per_example_ > 1 ? zeros(Shape{rows, labels_per_example_}, DType::i32)
                                           : zeros(Shape{rows}, DType::i32);
    return batch;
  };
  const int64_t row_bytes = input_.size_bytes() + labels_per_example_ * 4;
  // What the run holds on the device beside the step, measured (docs/memory.md): the next
  // batch, made while the step runs, and with asynchronous savepoints the snapshot's copy of
  // the state plus the step after it, which allocates its results anew while the copy still
  // reads the buffers it would have reused.
  const int64_t batch_bytes =
      config_.train.batch_size * (row_bytes + (config_.train.pad_remainder ? 4 : 0));
  const bool async_savepoints =
      config_.train.savepoint_async &&
      (config_.train.savepoint_every > 0 || config_.train.savepoint_every_seconds > 0);
  const int64_t beside = batch_bytes + (async_savepoints ? 2 * state_bytes : 0);
  auto planned_peak = [&](const TrainConfig& candidate) {
    TrainConfig update = update_config(candidate);
    check_mesh_fits(update, dataset.train.size());
    TrainStep step(build_model(update.model), optimizer, step_options_of(update, false));
    const int64_t rows = update.train.batch_size;
    Batch batch = zero_batch(rows);
    Array mask = update.train.pad_remainder ? ones(Shape{rows}) : Array();
    return step.compiled(state, batch.images, batch.labels, random::key(0), mask)
               .memory_plan()
               .peak_bytes +
           beside;
  };
  memory_fit_ = train::fit_memory_budget(written_config_, *budget, state_bytes, planned_peak);
  // The evaluation holds the optimizer state too (the eval step's arguments are the params
  // and model state), and the next test batch.
  EvalStep eval(build_model(memory_fit_->config.model), config_.train.flush_denormals,
                step_compute_dtype(config_.model));
  auto eval_peak = [&](int64_t rows) {
    Batch batch = zero_batch(rows);
    return eval.compiled(state, batch.images, batch.labels).memory_plan().peak_bytes +
           state.opt_state.size_bytes() + rows * row_bytes;
  };
  fit_eval_batch_size(*memory_fit_, dataset.test.size(), eval_peak);
  if (memory_fit_->config.train.eval_batch_size != written_config_.train.eval_batch_size) {
    data_->set_eval_batch_size(memory_fit_->config.train.eval_batch_size);
  }
  written_config_ = memory_fit_->config;
  config_ = update_config(written_config_);
  print(memory_fit_->to_string() +
        fmt::format("  (a plan's peak: its compiled step's, plus {} beside the step: the next "
                    "batch{})\n",
                    format_byte_size(beside),
                    async_savepoints ? ", and an asynchronous savepoint's copy of the state" : ""));
}

void Run::start_run_directory() {
  const TrainConfig& c = config_;
  std::string resolved = to_toml(written_config_);
  print(
      fmt::format("# resolved config ({})\n{}\n{}\n", c.source, resolved, model_->summary(input_)));
  nlohmann::json dataset = data_->dataset.to_json();
  dataset["name"] = c.data.dataset;
  track::RunInfo info;
  info.seed = c.experiment.seed;
  // Settings outside the config that change the weights' bits.
  info.kernels = configured_kernels();
  info.kiln_version = kKilnVersion;
  info.identity = identity_.record();
  set_section(info, "config_file", c.source);
  set_section(info, "dataset", dataset);
  set_section(info, "parameters", nn::parameter_count(state_.params));
  // The precision policy (docs/precision.md): what the layers compute in, what is kept.
  nlohmann::json precision = {
      {"compute", c.model.compute_dtype}, {"params", "f32"}, {"loss", "f32"}};
  if (loss_scale_.mode != "none") precision["loss_scale"] = loss_scale_.mode;
  // A policy per layer: the layers that compute in another dtype than the model's.
  nlohmann::json layers = nlohmann::json::object();
  for (size_t i = 0; i < c.model.layers.size(); ++i) {
    const LayerConfig& layer = c.model.layers[i];
    if (!layer.compute_dtype.empty() && layer.compute_dtype != c.model.compute_dtype) {
      layers[fmt::format("{}_{}", layer.type, i)] = layer.compute_dtype;
    }
  }
  if (!layers.empty()) precision["layers"] = layers;
  set_section(info, "precision", precision);
  set_section(info, "total_steps", total_steps_);
  if (memory_fit_) set_section(info, "memory_budget", memory_fit_json(*memory_fit_));
  set_section(info, "compute_threads", default_device().compute_threads());
  set_section(info, "environment", track::run_environment());
  if (!writes_) {
    run_.emplace(RunDirectory::follower(from_rank_zero("run directory", ""), info, 0));
    summary_.run_dir = run_->path();
    return;
  }
  run_.emplace(RunDirectory::create(c.experiment.runs_dir, c.experiment.name, resolved,
                                    identity_.config_sha256, info));
  from_rank_zero("run directory", run_->path().string());
  tracking_.emplace(c.tracking, c.experiment.runs_dir);
  for (const fs::path& crashed : run_->crashed_runs()) tracking_->other_run_changed(crashed);
  run_->observe(&*tracking_);
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
    // This rank's own signal, not agreed: the other ranks are stopped by the job's abort.
    throw InterruptedError(signal, 0, {},
                           fmt::format("interrupted by {} before the run started; nothing was "
                                       "written",
                                       signal_name(signal)),
                           false);
  }
  if (resume_) {
    reopen_run_directory();
    profiler_.emplace(writes_ ? options_.trace_steps : std::optional<StepRange>(), start_step_,
                      total_steps_);
  } else {
    // Checked before the run directory exists: a range outside the run writes nothing.
    profiler_.emplace(writes_ ? options_.trace_steps : std::optional<StepRange>(), 0, total_steps_);
    start_run_directory();
  }
  startup_.end_phase("run_directory");
  profiler_->set_trace_path(run_->path() / "trace.json");
  start_savepoints();
  Progress::Mode mode = options_.quiet || !writes_ ? Progress::Mode::kSilent
                        : options_.interactive     ? Progress::Mode::kBar
                                                   : Progress::Mode::kLines;
  progress_.emplace(mode, config_.train.log_every);
  progress_->starting_at(start_step_, total_steps_);
  try {
    train_epochs();
    save_final();
  } catch (const InterruptedError& interrupted) {
    if (writer_) writer_->wait();
    progress_->finish();
    keep_last_good_state();
    std::string problem =
        run_->finish_interrupted(signal_name(interrupted.signal()), interrupted.steps());
    if (!problem.empty()) progress_->message("warning: run.json not updated: " + problem);
    finish_tracking();
    throw;
  } catch (const std::exception& error) {
    if (writer_) writer_->wait();  // a save in flight finishes: it is good
    progress_->finish();
    keep_last_good_state();
    std::string problem = run_->finish_failed(error.what());
    if (!problem.empty()) progress_->message("warning: run.json not updated: " + problem);
    finish_tracking();
    throw;
  }
  write_report();
  finish_tracking();
  return summary_;
}

void Run::write_report() {
  if (!writes_) return;
  try {
    track::write_run_report(run_->path());
  } catch (const std::exception& error) {
    // The report is a view of the run directory; `kiln report` can make it later.
    summary_.tracking_problems.push_back(std::string("report.html not written: ") + error.what());
    print_best_effort(stderr, std::string("warning: report.html not written: ") + error.what() +
                                  " (`kiln report RUN` makes it later)\n");
  }
}

void Run::finish_tracking() {
  if (!tracking_) return;
  std::vector<std::string> problems = tracking_->finish();
  summary_.tracking_problems.insert(summary_.tracking_problems.end(), problems.begin(),
                                    problems.end());
  bool mirrored = tracking_->mlflow_summary().has_value();
  if (mirrored) {
    run_->info().mlflow = tracking_->mlflow_summary();
    if (summary_.tracking_problems.empty()) {
      try {
        run_->write_info();
      } catch (const std::exception& error) {
        print_best_effort(stderr,
                          std::string("warning: run.json not updated: ") + error.what() + "\n");
      }
      return;
    }
  }
  if (summary_.tracking_problems.empty()) return;
  progress_->finish();
  for (const std::string& problem : summary_.tracking_problems) {
    print_best_effort(stderr, "warning: " + problem + "\n");  // even when --quiet
  }
  set_section(run_->info(), "tracking_problems", summary_.tracking_problems);
  try {
    run_->write_info();
  } catch (const std::exception& error) {
    progress_->message(std::string("warning: run.json not updated: ") + error.what());
  }
}

StepOptions step_options_of(const TrainConfig& c, bool keep_inputs) {
  StepOptions options;
  options.keep_inputs = keep_inputs;
  options.skip_nonfinite = c.train.on_nonfinite == "skip";
  options.flush_denormals = c.train.flush_denormals;
  // Poisson batches are padded to a fixed number of rows.
  options.masked = c.train.pad_remainder || c.privacy.enabled;
  if (c.privacy.enabled) {
    options.privacy =
        StepOptions::Privacy{c.privacy.clip_norm, c.privacy.noise_multiplier,
                             static_cast<double>(c.train.batch_size), c.privacy.examples_per_chunk};
  }
  options.data_devices = c.mesh.data;
  options.chunks = c.mesh.chunks;
  options.accumulate = c.mesh.data == 0 ? c.train.accumulate : 1;
  options.shard_params = c.mesh.shard_params;
  options.model_devices = c.mesh.model;
  options.compute = step_compute_dtype(c.model);
  options.loss_scale = loss_scale_options_of(c);
  options.skipped_steps_advance_schedule = c.train.skipped_steps_advance_schedule;
  // With one device on `model` there is no model axis: the split layers are ordinary.
  if (c.mesh.model > 1) options.tensor_parallel = tensor_parallel_specs(c.model);
  if (dist::active()) {
    options.processes = dist::size();
    options.process_rank = dist::rank();
  }
  return options;
}

void Run::train_epochs() {
  const TrainConfig& c = config_;
  StepOptions step_options = step_options_of(c, options_.debug_nonfinite);
  // A private step's chunks are of privacy.examples_per_chunk rows (its mesh's share of them
  // per device).
  if (privacy_) step_options.chunks = privacy_->batch_rows / c.privacy.examples_per_chunk;
  TrainStep step(*model_, *optimizer_, step_options);
  if (c.telemetry.every > 0) {
    telemetry_ = LayerTelemetry::for_model(c.model, *optimizer_);
    if (!telemetry_) progress_->message("telemetry covers sequential models; this one has none");
  }
  EvalStep eval(*model_, c.train.flush_denormals, step_compute_dtype(c.model));
  std::deque<PendingStep> pending;
  int64_t step_number = start_step_;
  int64_t first_epoch = start_position_.epoch + 1;
  int64_t batches_per_epoch = data_->train->batches_per_epoch();
  // Workers assemble the next batches while the device runs the step. The savepoint counts
  // batches, the loader examples; a finished epoch continues with the next one.
  data::IteratorState loader_start{start_position_.epoch,
                                   start_position_.position * c.train.batch_size};
  if (start_position_.position >= batches_per_epoch) loader_start = {start_position_.epoch + 1, 0};
  data::Loader loader(*data_->train, data_->loader_options, loader_start);
  Clock::time_point loop_start = Clock::now();
  // A run resumed mid-epoch enters that epoch even when all steps are done: its evaluation
  // is still due.
  int64_t epochs_done = start_position_.epoch;
  for (int64_t epoch = first_epoch;
       epoch <= c.train.epochs && summary_.target_epoch == 0 &&
       (step_number < total_steps_ || (epoch == first_epoch && start_position_.position > 0));
       ++epoch) {
    bool resumed_epoch = epoch == first_epoch && start_step_ > 0;
    epoch_totals_ = EpochTotals{};
    if (resumed_epoch) {
      const SavedCounters& r = resumed_counters_;
      epoch_totals_ =
          EpochTotals{r.epoch_loss_sum, r.epoch_batches, r.epoch_correct, r.epoch_examples};
    }
    int64_t first_batch = epoch == first_epoch ? start_position_.position : 0;
    train_epoch(epoch, first_batch, step, loader, pending, step_number);
    int64_t syncs_before_eval = host_syncs_on_this_thread();
    end_epoch(epoch, step_number, eval);
    eval_syncs_ += host_syncs_on_this_thread() - syncs_before_eval;
    epochs_done = epoch;
  }
  progress_->finish();
  // The final savepoint: a crash before run.json says completed resumes from here.
  save_savepoint(step_number, {epochs_done, 0}, pending, true);
  summary_.steps = step_number;
  summary_.seconds = seconds_since(start_);
  summary_.median_step_ms = 1e3 * profile::summarize(0, step_seconds_).median_s;
  record_loop_reports(step, loader, seconds_since(loop_start), step_number);
}

// The batches of one epoch from `first_batch` on (while steps remain), each step's metrics
// read one step late, savepoints and stop requests between steps.
void Run::train_epoch(int64_t epoch, int64_t first_batch, TrainStep& step, data::Loader& loader,
                      std::deque<PendingStep>& pending, int64_t& step_number) {
  for (int64_t index = first_batch;
       index < data_->train->batches_per_epoch() && step_number < total_steps_; ++index) {
    const data::HostBatch& host = loader.next();
    KILN_CHECK(host.epoch == epoch - 1 && host.index == index);
    Batch batch = to_arrays(host, data_->dataset.input_dtype);
    ++step_number;
    Array key = random::fold_in(keys_.dropout, static_cast<uint32_t>(step_number));
    if (telemetry_ && step_number % config_.telemetry.every == 0 && !batch.mask.defined()) {
      record_telemetry(step_number, epoch, batch, key);
    }
    profiler_->before_step(step_number);
    std::function<NonFiniteOrigin()> explain;
    if (options_.debug_nonfinite) {
      // The state the step starts from: not donated, so still whole after it ran.
      explain = [&step, before = state_, batch, key] {
        return step.nonfinite_origin(before, batch.images, batch.labels, key, batch.mask);
      };
    }
    StepMetrics metrics = step.run(state_, batch.images, batch.labels, key, batch.mask);
    profiler_->after_step(step_number, state_, [&] {
      return step.compiled(state_, batch.images, batch.labels, key, batch.mask);
    });
    if (profiler_->done() && !profiled_) record_profile();
    if (host.truncated > 0) {
      truncated_examples_ += host.truncated;
      progress_->message(fmt::format(
          "warning: step {} drew {} more examples than its {} rows; they were left out "
          "(a chance below {:g} per step: run.json's privacy.overflow_probability_bound)",
          step_number, host.truncated, host.rows(), kPoissonOverflowPerStep));
    }
    pending.push_back(PendingStep{step_number, epoch, host.examples(), metrics,
                                  loader.last_wait_seconds(), std::move(explain)});
    // Read the previous step's metrics only now: the step just queued keeps the
    // device busy while the host waits.
    if (pending.size() > 1) {
      process(pending.front());
      pending.pop_front();
    }
    check_savepoints();
    DataPosition next{epoch - 1, index + 1};
    stop_if_asked(step_number, next, pending);
    if (savepoint_due(step_number)) save_savepoint(step_number, next, pending, false);
  }
  while (!pending.empty()) {
    process(pending.front());
    pending.pop_front();
  }
}

// run.json's "data_wait", "jit" and "timing" once the loop is done.
void Run::record_loop_reports(const TrainStep& step, const data::Loader& loader,
                              double loop_seconds, int64_t step_number) {
  set_section(
      run_->info(), "data_wait",
      {{"total_seconds", loader.total_wait_seconds()},
       {"fraction_of_training", loop_seconds > 0 ? loader.total_wait_seconds() / loop_seconds : 0},
       {"median_ms", 1e3 * profile::summarize(0, data_wait_seconds_).median_s},
       {"starved_steps", loader.starved_calls()},
       {"workers", data_->loader_options.workers},
       {"prefetch", data_->loader_options.prefetch}});
  JitStats stats = step.stats();
  set_section(run_->info(), "jit",
              {{"compiles", stats.compiles},
               {"compile_seconds", stats.compile_seconds},
               {"compile_reasons", stats.compile_reasons}});
  // The steady steps' own: evaluations and the savepoints' copies are reported apart.
  int64_t steady_steps = step_number - start_step_ - 1;
  int64_t step_syncs =
      host_syncs_on_this_thread() - syncs_after_first_step_ - eval_syncs_ - savepoint_syncs_;
  set_section(run_->info(), "timing",
              timing_report(stats, loop_seconds, loader.total_wait_seconds(),
                            steady_steps > 0 ? static_cast<double>(step_syncs) /
                                                   static_cast<double>(steady_steps)
                                             : 0.0));
}

// The devices each param should be whole on: the default device, or with [mesh] each of
// the mesh's devices (in an MPI job, those of this process).
std::string requested_devices(const MeshConfig& mesh) {
  if (mesh.data == 0) return default_device().to_string();
  std::string requested;
  for (int64_t d = 0; d < mesh.data / dist::size() * mesh.model; ++d) {
    requested += (d == 0 ? "" : ",") + devices()[static_cast<size_t>(d)]->to_string();
  }
  return requested;
}

// Each param's placement against `requested`: the rows, and how many are elsewhere.
std::pair<nlohmann::json, int64_t> placement_report(const Tree& params,
                                                    const std::vector<std::string>& paths,
                                                    const std::string& requested) {
  nlohmann::json rows = nlohmann::json::array();
  int64_t misplaced = 0;
  std::vector<Array> leaves = params.leaves();
  for (size_t i = 0; i < leaves.size(); ++i) {
    Placement where = kiln::placement(leaves[i]);
    std::string devices;
    for (const PlacementPiece& piece : where.pieces) {
      devices += (devices.empty() ? "" : ",") + piece.device->to_string();
    }
    bool ok = devices == requested;
    misplaced += !ok;
    rows.push_back({{"param", paths[i]},
                    {"shape", where.aval.to_string()},
                    {"devices", devices},
                    {"requested", requested},
                    {"ok", ok}});
  }
  return {rows, misplaced};
}

// The most any one device holds of params and optimizer state (mesh.shard_params divides
// it).
int64_t most_state_bytes_on_a_device(const TrainState& state) {
  std::map<std::string, int64_t> state_bytes;
  for (const Tree* tree : {&state.params, &state.opt_state}) {
    for (const Array& leaf : tree->leaves()) {
      for (const PlacementPiece& piece : kiln::placement(leaf).pieces) {
        state_bytes[piece.device->to_string()] += piece.bytes;
      }
    }
  }
  int64_t most = 0;
  for (const auto& [device, bytes] : state_bytes) most = std::max(most, bytes);
  return most;
}

nlohmann::json Run::timing_report(const JitStats& stats, double loop_seconds,
                                  double data_wait_seconds, double syncs_per_step) const {
  profile::Timing steps = profile::summarize(0, step_seconds_);
  auto percent = [&](double seconds) {
    return loop_seconds > 0 ? 100 * seconds / loop_seconds : 0;
  };
  auto [placement, misplaced] =
      placement_report(state_.params, param_paths_, requested_devices(config_.mesh));
  double median_s = steps.median_s;
  return {{"compile_seconds", stats.compile_seconds},
          {"processes", dist::size()},
          // What this rank sent to the others (the steps' sums and the agreements).
          {"process_bytes_sent", dist::bytes_sent()},
          {"state_bytes_per_device", most_state_bytes_on_a_device(state_)},
          {"compiles", stats.compiles},
          {"first_step_seconds", summary_.first_step_seconds},
          {"startup", startup_json(startup_)},
          {"steady_steps", static_cast<int64_t>(step_seconds_.size())},
          {"step_ms",
           {{"median", 1e3 * median_s}, {"p10", 1e3 * steps.p10_s}, {"p90", 1e3 * steps.p90_s}}},
          {"examples_per_second",
           median_s > 0 ? static_cast<double>(config_.train.batch_size) / median_s : 0.0},
          {"data_wait_percent", percent(data_wait_seconds)},
          {"savepoint_percent", percent(savepoint_thread_seconds_)},
          {"host_syncs_per_step", syncs_per_step},
          {"savepoint_host_syncs", savepoint_syncs_},
          {"misplaced_params", misplaced},
          {"placement", placement}};
}

void Run::record_profile() {
  profiled_ = true;
  for (const auto& [key, text] : profiler_->sections()) run_->info().sections[key] = text;
  // Written now: when run.json cannot grow (a full disk), the profile is dropped rather
  // than left in the record, where it would keep every later rewrite, the final status
  // among them, from fitting.
  try {
    run_->write_info();
  } catch (const std::exception& error) {
    for (const auto& [key, text] : profiler_->sections()) run_->info().sections.erase(key);
    progress_->message(std::string("warning: the profile is not in run.json: ") + error.what());
  }
  if (options_.trace_steps && profiler_->trace_written()) {
    progress_->message(fmt::format("trace of steps {}-{}: {} (open it in ui.perfetto.dev)",
                                   options_.trace_steps->first, options_.trace_steps->last,
                                   (run_->path() / "trace.json").string()));
  }
}

// Between steps: a stop request ends the run once the steps queued so far are recorded
// and a savepoint of the state after them is written.
void Run::stop_if_asked(int64_t step_number, DataPosition next, std::deque<PendingStep>& pending) {
  int signal = options_.stop_signal ? options_.stop_signal->load() : 0;
  if (dist::size() > 1) signal = agreed_stop_signal(signal);
  if (signal == 0) return;
  std::string saved;
  try {
    save_savepoint(step_number, next, pending, true);
    saved = fmt::format("savepoint {} written; continue with: kiln resume {}",
                        summary_.last_savepoint.filename().string(), run_->path().string());
  } catch (const std::exception& error) {
    // The stop still happens; the earlier savepoints are intact.
    saved = fmt::format(
        "the savepoint of step {} could not be written ({}); kiln resume {} "
        "continues from the previous one",
        step_number, error.what(), run_->path().string());
  }
  throw InterruptedError(
      signal, step_number, run_->path(),
      fmt::format("interrupted by {} after step {} of {}; run.json says interrupted; {}",
                  signal_name(signal), step_number, total_steps_, saved),
      true);
}

void Run::start_savepoints() {
  const TrainLoopConfig& t = config_.train;
  last_savepoint_at_ = Clock::now();
  // The state is replicated over the ranks: rank 0's savepoint holds all of it.
  if (!writes_) return;
  // This process owns the run now: what an earlier one left half-written goes.
  savepoint::remove_uncommitted(savepoints_dir(run_->path()));
  if (t.savepoint_async) {
    writer_.emplace(savepoints_dir(run_->path()),
                    savepoint::Retention{t.savepoint_keep_last, t.savepoint_keep_every});
  }
  last_savepoint_at_ = Clock::now();
}

bool Run::savepoint_due(int64_t step_number) const {
  const TrainLoopConfig& t = config_.train;
  if (step_number >= total_steps_) return false;  // the final savepoint follows
  if (t.savepoint_every > 0 && step_number % t.savepoint_every == 0) return true;
  return t.savepoint_every_seconds > 0 &&
         seconds_since(last_savepoint_at_) >= t.savepoint_every_seconds;
}

void Run::save_savepoint(int64_t step_number, DataPosition data, std::deque<PendingStep>& pending,
                         bool wait) {
  while (!pending.empty()) {
    process(pending.front());
    pending.pop_front();
  }
  Clock::time_point began = Clock::now();
  // What the training thread spends on savepoints, for docs/performance.md.
  struct Account {
    Run& run;
    Clock::time_point began;
    int64_t syncs = host_syncs_on_this_thread();
    ~Account() {
      run.savepoint_thread_seconds_ += seconds_since(began);
      run.savepoint_syncs_ += host_syncs_on_this_thread() - syncs;
      ++run.savepoints_started_;
    }
  } account{*this, began};
  if (!writes_) return;
  // At most one save in flight, so at most one copy of the state on the host.
  if (writer_) {
    writer_->wait();
    check_savepoints();
  }
  SavedCounters counters;
  counters.step = step_number;
  counters.data = data;
  counters.batch_size = config_.train.batch_size;
  counters.skipped_steps = summary_.skipped_steps;
  if (loss_scale_.mode == "dynamic") counters.overflow_steps = summary_.overflow_steps;
  counters.metrics_lines = run_->metrics_lines();
  counters.epoch_loss_sum = epoch_totals_.loss_sum;
  counters.epoch_batches = epoch_totals_.batches;
  counters.epoch_correct = epoch_totals_.correct;
  counters.epoch_examples = epoch_totals_.examples;
  savepoint::Snapshot snapshot = take_snapshot(state_, keys_, counters, identity_);
  snapshot.run_id = run_->run_id();
  last_savepoint_at_ = Clock::now();
  fs::path dir = savepoints_dir(run_->path());
  if (writer_ && !wait) {
    writer_->start(std::move(snapshot));
    return;
  }
  try {
    summary_.last_savepoint = savepoint::write(dir, snapshot);
    savepoint::apply_retention(dir, savepoint::Retention{config_.train.savepoint_keep_last,
                                                         config_.train.savepoint_keep_every});
  } catch (const std::exception& error) {
    savepoint_failed(step_number, error.what());
  }
}

void Run::check_savepoints() {
  if (!writer_) return;
  for (const savepoint::Outcome& outcome : writer_->take_outcomes()) {
    if (outcome.error.empty()) {
      summary_.last_savepoint = outcome.path;
    } else {
      savepoint_failed(outcome.step, outcome.error);
    }
  }
}

void Run::savepoint_failed(int64_t step, const std::string& error) {
  std::string text = fmt::format(
      "the savepoint of step {} could not be written (the earlier savepoints are intact): {}", step,
      error);
  if (config_.train.on_savepoint_error == "stop") {
    fail(kUnknownSite, text,
         "free space or fix the file system, then kiln resume the run; or set "
         "train.on_savepoint_error = \"continue\" to train on without it");
  }
  savepoint_errors_.push_back({{"step", step}, {"error", error}});
  set_section(run_->info(), "savepoint_errors", savepoint_errors_);
  progress_->message("warning: " + text + "; training continues (train.on_savepoint_error)");
}

// resume(): the same run directory, its metrics cut back to the savepoint, the state, keys,
// counters and data position restored.
void Run::reopen_run_directory() {
  ResumePoint point = find_resume_point(resume_->run_dir, resume_->info, identity_, state_, keys_,
                                        config_.train.batch_size, resume_->options->allow_changed);
  for (const std::string& problem : point.skipped) {
    summary_.notes.push_back(fmt::format("skipped damaged savepoint {}", problem));
  }
  int64_t metrics_lines = 0;
  if (point.restored) {
    const Restored& restored = *point.restored;
    state_ = restored.state;
    keys_ = restored.keys;
    resumed_counters_ = restored.counters;
    start_step_ = restored.counters.step;
    if (privacy_ && config_.privacy.max_epsilon > 0 &&
        start_step_ > privacy_->steps_within_budget) {
      fail(kUnknownSite,
           fmt::format("privacy.max_epsilon = {}: the savepoint is after step {}, which spent "
                       "epsilon {:.4g} at delta {}: more than the budget, which allows {} steps",
                       config_.privacy.max_epsilon, start_step_,
                       privacy_->accountant.after(start_step_).epsilon, config_.privacy.delta,
                       privacy_->steps_within_budget),
           "the budget is spent: a resumed run cannot train further within it");
    }
    start_position_ = restored.counters.data;
    summary_.skipped_steps = restored.counters.skipped_steps;
    summary_.overflow_steps = restored.counters.overflow_steps.value_or(0);
    metrics_lines = restored.counters.metrics_lines;
    summary_.resumed_from_step = start_step_;
    summary_.last_savepoint = point.loaded->path;
  } else {
    summary_.resumed_from_step = 0;
    summary_.notes.push_back("no usable savepoint: starting again from step 0");
  }
  if (!point.changes.empty()) {
    summary_.notes.push_back(
        fmt::format("continuing with {} change(s) to the run identity "
                    "(--allow-changed)",
                    point.changes.size()));
  }
  track::RunInfo info = resume_->info;
  info.sections.erase("resumes");  // damaged (not a list of resumes): started again
  info.resumes.push_back(resume_record(resume_->run_dir, info, point));
  info.config_sha256 = identity_.config_sha256;
  info.identity = identity_.record();
  agree_on_resume_step();
  if (!writes_) {
    run_.emplace(RunDirectory::follower(resume_->run_dir, info, metrics_lines));
    summary_.run_dir = run_->path();
    return;
  }
  reopen_as_writer(std::move(info), metrics_lines, !point.changes.empty());
}

// Every rank resumes from the same step (rank 0's savepoint is the one they all read).
void Run::agree_on_resume_step() const {
  std::string zero_step = from_rank_zero("resume step", std::to_string(start_step_));
  if (zero_step != std::to_string(start_step_)) {
    fail(kUnknownSite,
         fmt::format("rank {} would resume {} from step {}, rank 0 from step {}", dist::rank(),
                     resume_->run_dir.string(), start_step_, zero_step),
         "every rank must see the same run directory (a shared file system)");
  }
}

void Run::reopen_as_writer(track::RunInfo info, int64_t metrics_lines, bool identity_changed) {
  run_.emplace(RunDirectory::reopen(resume_->run_dir, std::move(info), metrics_lines));
  // The config the run continues with (--allow-changed), before tracking records it.
  if (identity_changed) {
    io::write_file_atomically(run_->path() / "config.toml", to_toml(written_config_));
  }
  // The catalog beside the run: <runs_dir>/<experiment>/<run-id> -> <runs_dir>/kiln.db.
  fs::path run_dir = resume_->run_dir.lexically_normal();
  if (run_dir.filename().empty()) run_dir = run_dir.parent_path();
  tracking_.emplace(config_.tracking, run_dir.parent_path().parent_path());
  run_->observe(&*tracking_);
  tracking_->reopened(run_->path(), run_->info());
  summary_.run_dir = run_->path();
  for (const std::string& note : summary_.notes) print(note + "\n");
  print(fmt::format("resuming {} from step {} of {}\n", run_->path().string(),
                    summary_.resumed_from_step, total_steps_));
}

void Run::end_epoch(int64_t epoch, int64_t step_number, const EvalStep& eval) {
  const TrainConfig& c = config_;
  progress_->working_on(fmt::format("evaluating epoch {} on the test set", epoch));
  EvalResult test = evaluate(eval, state_, *data_->test, data_->dataset.input_dtype);
  progress_->working_on("");
  summary_.test_accuracy = test.accuracy;
  summary_.test_loss = test.loss;
  summary_.train_loss = epoch_totals_.mean_loss();
  track::MetricsLine line;
  line.kind = "eval";
  line.step = step_number;
  line.epoch = epoch;
  line.values = {{"train_loss", epoch_totals_.mean_loss()},
                 {"train_accuracy", epoch_totals_.accuracy()},
                 {"test_loss", test.loss},
                 {"test_accuracy", test.accuracy}};
  std::string spent;
  if (privacy_) {
    nlohmann::json record = privacy_record(c, *privacy_, step_number, truncated_examples_);
    const double epsilon = record["epsilon"].get<double>();
    line.values["privacy_epsilon"] = epsilon;
    spent = fmt::format("  |  epsilon {:.3f}", epsilon);
    set_section(run_->info(), "privacy", record);
  }
  run_->append_metrics(std::move(line));
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
  if (options_.stop_at && options_.stop_at->reached(test.accuracy, test.loss)) {
    summary_.target_epoch = epoch;
    progress_->message(fmt::format("{} reached {} after epoch {}: stopping here",
                                   options_.stop_at->metric, options_.stop_at->value, epoch));
  }
  progress_->message(fmt::format(
      "epoch {}/{}: train loss {:.4f} acc {:.2f}%  |  test loss {:.4f} acc {:.2f}%{}  |  {}", epoch,
      c.train.epochs, epoch_totals_.mean_loss(), 100 * epoch_totals_.accuracy(), test.loss,
      100 * test.accuracy, spent, format_duration(seconds_since(start_))));
}

void Run::process(const PendingStep& pending) {
  const StepMetrics& m = pending.metrics;
  double loss = m.loss.item<double>();
  int64_t correct = m.correct.item<int64_t>();
  double lr = m.lr.item<double>();
  std::vector<bool> nonfinite = host_bools(m.nonfinite);
  std::optional<double> scale;
  if (m.loss_scale.defined()) scale = m.loss_scale.item<double>();
  time_step(pending);
  bool bad_gradient = std::find(nonfinite.begin(), nonfinite.end(), true) != nonfinite.end();
  // With dynamic loss scaling a finite loss whose gradient is not finite is an overflow
  // (the step skipped, the scale backed off), unless the scale is already at its floor, 1:
  // then the gradient is not finite by itself, and train.on_nonfinite decides.
  if (std::isfinite(loss) && bad_gradient && loss_scale_.mode == "dynamic" && scale && *scale > 1) {
    report_overflow(pending, loss, *scale, nonfinite);
    return;
  }
  if (!std::isfinite(loss) || bad_gradient) {
    report_nonfinite(pending, loss, nonfinite);
    return;
  }
  epoch_totals_.loss_sum += loss;
  epoch_totals_.batches += 1;
  epoch_totals_.correct += correct;
  epoch_totals_.examples += pending.batch_size * labels_per_example_;
  double step_seconds = step_seconds_.empty() ? 0 : step_seconds_.back();
  track::MetricsLine line;
  line.kind = "train";
  line.step = pending.step;
  line.epoch = pending.epoch;
  line.values = {{"loss", loss},
                 {"accuracy", static_cast<double>(correct) /
                                  static_cast<double>(pending.batch_size * labels_per_example_)},
                 {"lr", lr},
                 {"step_ms", 1e3 * step_seconds},
                 {"data_wait_ms", 1e3 * pending.data_wait_seconds}};
  if (scale) line.values["loss_scale"] = *scale;
  run_->append_metrics(std::move(line));
  show_progress(pending);
}

// The step's time, from the previous step's completion to this one's (the first step's
// is its time since the process started).
void Run::time_step(const PendingStep& pending) {
  Clock::time_point now = Clock::now();
  if (pending.step == start_step_ + 1) {
    // Synchronizations are counted from here: the first step's include its compilation's
    // reads of constants.
    syncs_after_first_step_ = host_syncs_on_this_thread();
    startup_.end_phase("first_step");  // dispatch, compilation and the step itself
    eval_syncs_ = 0;
    savepoint_syncs_ = 0;
  }
  if (pending.step == 1) {
    summary_.first_step_seconds = options_.process_start_age_seconds + seconds_since(start_);
    run_->info().first_step_seconds = summary_.first_step_seconds;
  } else if (last_completion_) {
    double seconds = std::chrono::duration<double>(now - *last_completion_).count();
    step_seconds_.push_back(seconds);
    data_wait_seconds_.push_back(pending.data_wait_seconds);
    recent_rates_.push_back(static_cast<double>(pending.batch_size) / seconds);
    if (recent_rates_.size() > 20) recent_rates_.pop_front();
  }
  last_completion_ = now;
}

void Run::show_progress(const PendingStep& pending) {
  double rate = 0;
  for (double r : recent_rates_) rate += r;
  if (!recent_rates_.empty()) rate /= static_cast<double>(recent_rates_.size());
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

std::vector<std::string> Run::nonfinite_paths(const std::vector<bool>& flags) const {
  std::vector<std::string> bad;
  for (size_t leaf : backward_order_) {
    if (flags[leaf]) bad.push_back(param_paths_[leaf]);
  }
  return bad;
}

void Run::report_overflow(const PendingStep& pending, double loss, double scale,
                          const std::vector<bool>& flags) {
  std::vector<std::string> bad = nonfinite_paths(flags);
  track::MetricsLine line;
  line.kind = "nonfinite";
  line.step = pending.step;
  line.epoch = pending.epoch;
  line.values = {{"loss", loss}, {"loss_scale", scale}};
  line.texts = {{"first_nonfinite_gradient", bad.empty() ? "" : bad.front()},
                {"action", "skipped"},
                {"cause", "loss_scale_overflow"}};
  line.lists = {{"nonfinite_gradients", bad}};
  run_->append_metrics(std::move(line));
  ++summary_.skipped_steps;
  ++summary_.overflow_steps;
  progress_->message(fmt::format(
      "skipped step {} (epoch {}): the gradient overflowed at loss scale {}; the scale backs off "
      "to {}",
      pending.step, pending.epoch, scale, std::max(scale * loss_scale_.backoff, 1.0)));
}

void Run::record_telemetry(int64_t step_number, int64_t epoch, const Batch& batch,
                           const Array& key) {
  const TelemetryConfig& c = config_.telemetry;
  std::vector<LayerStats> layers = telemetry_->measure(state_, batch.images, batch.labels, key);
  track::MetricsLine line;
  line.kind = "telemetry";
  line.step = step_number;
  line.epoch = epoch;
  std::vector<std::string> warnings;
  for (const LayerStats& layer : layers) {
    for (const auto& [name, value] : layer.values) line.values[layer.layer + "/" + name] = value;
    auto at = [&](const char* name) {
      auto it = layer.values.find(name);
      return it == layer.values.end() ? 0.0 : it->second;
    };
    if (at("dead_fraction") > c.dead_warning) {
      warnings.push_back(
          fmt::format("{}: {:.0f}% of its units are dead (zero for every example "
                      "of step {}'s batch; telemetry.dead_warning = {})",
                      layer.layer, 100 * at("dead_fraction"), step_number, c.dead_warning));
    }
    if (at("saturated_fraction") > c.saturation_warning) {
      warnings.push_back(fmt::format(
          "{}: {:.0f}% of its outputs are saturated at step {} "
          "(telemetry.saturation_warning = {})",
          layer.layer, 100 * at("saturated_fraction"), step_number, c.saturation_warning));
    }
  }
  for (const std::string& warning : warnings) progress_->message("warning: " + warning);
  if (!warnings.empty()) line.lists["warnings"] = warnings;
  run_->append_metrics(std::move(line));
}

// A step with a non-finite loss or gradient: recorded, then stopped or skipped.
void Run::report_nonfinite(const PendingStep& pending, double loss,
                           const std::vector<bool>& flags) {
  std::vector<std::string> bad = nonfinite_paths(flags);
  std::string where =
      bad.empty() ? "none (the loss alone)"
                  : fmt::format("{} (in backward order: the last layer's first)", bad.front());
  bool skip = config_.train.on_nonfinite == "skip";
  std::string text = fmt::format("step {} (epoch {}): loss is {}; first non-finite gradient: {}",
                                 pending.step, pending.epoch, loss, where);
  track::MetricsLine line;
  line.kind = "nonfinite";
  line.step = pending.step;
  line.epoch = pending.epoch;
  line.values = {{"loss", loss}};
  line.texts = {{"first_nonfinite_gradient", bad.empty() ? "" : bad.front()},
                {"action", skip ? "skipped" : "stopped"}};
  if (pending.explain_nonfinite) {
    progress_->working_on(
        fmt::format("running step {} again, one primitive at a time", pending.step));
    NonFiniteOrigin origin = pending.explain_nonfinite();
    progress_->working_on("");
    std::string explained = origin.to_string();
    while (!explained.empty() && explained.back() == '\n') explained.pop_back();
    line.texts["nonfinite_origin"] = explained;
    text += "\nwhere it came from: " + explained;
  }
  line.lists = {{"nonfinite_gradients", bad}};
  run_->append_metrics(std::move(line));
  if (!skip) {
    throw NonFiniteError(text + " (set train.on_nonfinite = \"skip\" to skip such steps)");
  }
  ++summary_.skipped_steps;
  progress_->message("skipped " + text);
  // Loss-scale overflows are how dynamic loss scaling finds its scale: not failures.
  int64_t nonfinite_steps = summary_.skipped_steps - summary_.overflow_steps;
  if (nonfinite_steps > config_.train.max_skipped_steps) {
    throw NonFiniteError(fmt::format(
        "{} steps were skipped as non-finite, more than train.max_skipped_steps = {}; the last: "
        "{}",
        nonfinite_steps, config_.train.max_skipped_steps, text));
  }
}

// A run that fails or is interrupted after a good epoch keeps that epoch's weights, under
// names that cannot be taken for a finished run's. Best effort: the disk may be full.
void Run::keep_last_good_state() {
  if (!last_good_ || !run_ || !writes_) return;
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
  set_section(run_->info(), "last_good", record);
}

void Run::record_loss_scale() {
  if (loss_scale_.mode == "none") return;
  nlohmann::json record = {{"mode", loss_scale_.mode}, {"initial", loss_scale_.initial}};
  if (loss_scale_.mode == "dynamic") {
    record["growth_interval"] = loss_scale_.growth_interval;
    record["backoff"] = loss_scale_.backoff;
    record["growth"] = loss_scale_.growth;
    record["overflow_steps"] = summary_.overflow_steps;
    summary_.final_loss_scale = on_one_device(state_.loss_scale)["scale"].leaf().item<double>();
    record["final_scale"] = summary_.final_loss_scale;
  }
  set_section(run_->info(), "loss_scale", record);
}

void Run::save_final() {
  agree_on_params(state_.params);
  if (!writes_) {
    run_->finish_completed();
    return;
  }
  std::map<std::string, std::string> metadata = {{"format", "kiln params"},
                                                 {"experiment", config_.experiment.name},
                                                 {"steps", std::to_string(summary_.steps)}};
  fs::path params_path = run_->path() / "params.safetensors";
  save_safetensors(params_path, state_.params, metadata);
  summary_.params_sha256 = io::sha256_file(params_path);
  track::RunInfo& info = run_->info();
  info.params_file = "params.safetensors";
  info.params_sha256 = summary_.params_sha256;
  if (state_.model_state.num_leaves() > 0) {
    save_safetensors(run_->path() / "state.safetensors", state_.model_state, metadata);
    info.state_file = "state.safetensors";
  }
  info.steps = summary_.steps;
  info.skipped_steps = summary_.skipped_steps;
  record_loss_scale();
  if (!summary_.last_savepoint.empty()) {
    info.last_savepoint = fs::relative(summary_.last_savepoint, run_->path()).string();
  }
  set_section(
      info, "savepoints",
      {{"started", savepoints_started_}, {"training_thread_seconds", savepoint_thread_seconds_}});
  info.seconds = summary_.seconds;
  info.median_step_ms = summary_.median_step_ms;
  info.final_metrics =
      track::FinalMetrics{summary_.test_accuracy, summary_.test_loss, summary_.train_loss};
  last_good_.reset();  // the final weights are written: nothing else to keep
  run_->finish_completed();
}

}  // namespace

bool QualityTarget::reached(double test_accuracy, double test_loss) const {
  return metric == "test_loss" ? test_loss <= value : test_accuracy >= value;
}

std::string signal_name(int signal) {
  if (signal == SIGINT) return "SIGINT";
  if (signal == SIGTERM) return "SIGTERM";
  if (signal == SIGHUP) return "SIGHUP";
  return fmt::format("signal {}", signal);
}

TrainSummary train(const TrainConfig& config, const TrainOptions& options) {
  return Run(config, options).execute();
}

namespace {

// What kiln checks of a run's records against edits (docs/reliability.md, *What kiln
// trusts*): a run.json names its own run, and a completed run has the weights it recorded.
// Checksums find damage, not a deliberate edit signed again; these find the edits that
// would make resume do something else than the record says.
void check_record_is_this_runs(const fs::path& run_dir, const track::RunInfo& info) {
  const std::string& recorded = info.run_id;
  std::string directory = fs::weakly_canonical(run_dir).filename().string();
  if (recorded.empty() || recorded == directory) return;
  fail(kUnknownSite,
       fmt::format("cannot resume '{}': its run.json is the record of run {}, not of this "
                   "directory ({})",
                   io::printable_path(run_dir), recorded, io::printable_path(directory)),
       "a run directory keeps the name kiln gave it; resume the directory the run created (or "
       "rename this one back)");
}

void check_final_weights(const fs::path& run_dir, const track::RunInfo& info) {
  std::string problem = final_weights_problem(run_dir, info);
  if (problem.empty()) return;
  fail(kUnknownSite,
       fmt::format("cannot resume '{}': run.json says it completed, but {}",
                   io::printable_path(run_dir), problem),
       "the final weights were removed or changed after the run ended (or run.json was "
       "edited); train the config again for a new run");
}

}  // namespace

TrainSummary resume(const fs::path& run_dir, const ResumeOptions& resume,
                    const TrainOptions& options) {
  // The directory's owner until the run ends, before anything in it is read: of two
  // resumes started together, the second is refused here. Rank 0 writes, so rank 0 owns it.
  RunLock lock = dist::rank() == 0 ? RunLock::acquire(run_dir, "resume") : RunLock();
  // In an MPI job rank 0 reads run.json for all: it rewrites run.json as it resumes, and
  // a rank reading it then would find the run running.
  track::RunInfo info = dist::rank() == 0 ? track::read_run_info(run_dir) : track::RunInfo();
  if (dist::size() > 1) {
    info = track::parse_run_info(from_rank_zero("run.json", track::run_info_text(info)),
                                 "rank 0's run.json");
  }
  check_record_is_this_runs(run_dir, info);
  if (info.status == "completed") {
    check_final_weights(run_dir, info);
    TrainSummary summary;
    summary.run_dir = run_dir;
    summary.already_completed = true;
    summary.steps = info.steps.value_or(0);
    summary.params_sha256 = info.params_sha256;
    return summary;
  }
  if (run_may_be_running(info)) {
    fail(kUnknownSite,
         fmt::format("cannot resume '{}': run.json says it is running (pid {} on {})",
                     run_dir.string(), info.pid.value_or(0), info.host.empty() ? "?" : info.host),
         "wait for that process, or stop it; a run of another host cannot be judged from here");
  }
  TrainConfig config = load_config(run_dir / "config.toml", resume.overrides);
  ResumePlan plan{run_dir, info, &resume};
  return Run(config, options, &plan).execute();
}

}  // namespace kiln::train
