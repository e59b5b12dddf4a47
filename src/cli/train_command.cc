// `kiln train CONFIG`: one training run from a TOML config (see docs/training.md), and
// `kiln resume RUN_DIR`: the same run continued from its latest savepoint
// (docs/savepoints.md). Both stop gracefully on SIGINT/SIGTERM/SIGHUP with a savepoint.
#include <signal.h>
#include <unistd.h>

#include <atomic>

#include <ctime>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/process_age.h"
#include "dist/processes.h"
#include "train/config.h"
#include "train/progress.h"
#include "train/trainer.h"

namespace kiln::cli {
namespace {

struct TrainCommandOptions {
  std::string config;  // train: the TOML file; resume: the run directory
  std::vector<std::string> overrides;
  bool allow_changed = false;  // resume
  bool no_progress = false;
  bool quiet = false;
  bool print_config = false;
  std::string trace_steps;  // "A-B", or "" for none
  bool debug_nonfinite = false;
  std::string memory_budget;  // train: --memory-budget, the same as --set train.memory_budget
};

// SIGINT / SIGTERM / SIGHUP ask the run to stop after the step in flight (the trainer polls this);
// a second one ends the process at once, as the default action would.
std::atomic<int> stop_signal{0};

void on_stop_signal(int signal) {
  if (stop_signal.load() != 0) {
    ::signal(signal, SIG_DFL);
    ::raise(signal);
    return;
  }
  stop_signal.store(signal);
  constexpr char kNote[] =
      "\nkiln: stopping after the current step (send the signal again to stop at once)\n";
  (void)!::write(STDERR_FILENO, kNote, sizeof kNote - 1);
}

void handle_stop_signals() {
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  // SIGHUP (the terminal or the ssh session closed) too: left to its default action, it
  // would end the process with the run still "running" until the next resume noticed.
  for (int signal : {SIGINT, SIGTERM, SIGHUP}) sigaction(signal, &action, nullptr);
}

void print_summary(const train::TrainSummary& summary) {
  std::string text = fmt::format(
      "done: {} steps{} in {}; test accuracy {:.2f}%, test loss {:.4f}; median step {:.2f} ms; "
      "first step {:.2f} s after process start\n",
      summary.steps,
      summary.skipped_steps == 0   ? ""
      : summary.overflow_steps > 0 ? fmt::format(" ({} skipped, {} of them loss-scale overflows)",
                                                 summary.skipped_steps, summary.overflow_steps)
                                   : fmt::format(" ({} skipped)", summary.skipped_steps),
      train::format_duration(summary.seconds), 100 * summary.test_accuracy, summary.test_loss,
      summary.median_step_ms, summary.first_step_seconds);
  text += fmt::format("params: {} (sha256 {})\n", (summary.run_dir / "params.safetensors").string(),
                      summary.params_sha256);
  if (!summary.last_savepoint.empty()) {
    text += fmt::format("savepoint: {}\n", summary.last_savepoint.string());
  }
  text += fmt::format("{}\n", summary.run_dir.string());
  // The run is recorded; a full or closed stdout must not turn it into a failure.
  train::print_best_effort(stdout, text);
}

// `started_age`: the process's age on entering the command; the config was loaded since.
train::TrainOptions train_options(const TrainCommandOptions& options, double started_age) {
  train::TrainOptions train_options;
  double now_age = process_age_seconds();
  train_options.config_seconds = std::max(0.0, now_age - started_age);
  train_options.interactive = !options.no_progress && isatty(STDERR_FILENO) != 0;
  train_options.quiet = options.quiet;
  train_options.process_start_age_seconds = std::max(now_age, started_age);
  train_options.stop_signal = &stop_signal;
  train_options.debug_nonfinite = options.debug_nonfinite;
  if (!options.trace_steps.empty()) {
    train_options.trace_steps = train::parse_step_range(options.trace_steps);
  }
  return train_options;
}

// Runs `body` (train or resume) and maps how it ended to the documented exit status.
int run_and_report(const std::function<train::TrainSummary()>& body) {
  try {
    train::TrainSummary summary = body();
    if (summary.already_completed) {
      train::print_best_effort(
          stdout, fmt::format("nothing to do: {} completed ({} steps; params sha256 {})\n",
                              summary.run_dir.string(), summary.steps, summary.params_sha256));
      return 0;
    }
    // In an MPI job every rank has the same summary; rank 0 prints it.
    if (dist::rank() == 0) print_summary(summary);
    return 0;
  } catch (const train::NonFiniteError& error) {
    dist::exit_together();
    if (dist::rank() == 0)
      train::print_best_effort(stderr, fmt::format("error: {}\n", error.what()));
    return 2;
  } catch (const train::InterruptedError& interrupted) {
    // An agreed stop: the ranks all get here after the same step, and rank 0 has written
    // the savepoint and run.json; aborting the job from a faster rank could cut rank 0 off
    // in the middle of them (issue 43, defect 5).
    if (interrupted.every_rank()) dist::exit_together();
    std::string text = fmt::format("interrupted: {}\n", interrupted.what());
    if (!interrupted.run_dir().empty()) text += interrupted.run_dir().string() + "\n";
    if (dist::rank() == 0) train::print_best_effort(stderr, text);
    return 128 + interrupted.signal();  // as a shell reports a process killed by it
  }
}

int run_train(const TrainCommandOptions& options) {
  double started_age = process_age_seconds();
  // At once: a signal during loading is then an interruption before the run starts.
  handle_stop_signals();
  std::vector<std::string> overrides = options.overrides;
  if (!options.memory_budget.empty()) {
    overrides.push_back("train.memory_budget=" + options.memory_budget);
  }
  train::TrainConfig config = train::load_config(options.config, overrides);
  if (options.print_config) {
    fmt::print("{}", train::to_toml(config));
    return 0;
  }
  train::TrainOptions run_options = train_options(options, started_age);
  return run_and_report([&] { return train::train(config, run_options); });
}

int run_resume(const TrainCommandOptions& options) {
  double started_age = process_age_seconds();
  handle_stop_signals();
  train::ResumeOptions resume;
  resume.overrides = options.overrides;
  resume.allow_changed = options.allow_changed;
  train::TrainOptions run_options = train_options(options, started_age);
  return run_and_report([&] { return train::resume(options.config, resume, run_options); });
}

// train and resume: --debug-nonfinite.
void add_debug_nonfinite_flag(CLI::App& command, TrainCommandOptions& options) {
  command.add_flag("--debug-nonfinite", options.debug_nonfinite,
                   "When a step's loss or gradient is not finite, run that step again one "
                   "primitive at a time and name the first operation that made a NaN or an "
                   "infinity, with its source line (slower: the step's inputs are kept; one "
                   "device only; docs/training.md)");
}

}  // namespace

Runner add_train_command(CLI::App& app) {
  auto* command = app.add_subcommand(
      "train",
      "Train a model from a TOML config; writes runs/<experiment>/<run-id>/ (config, "
      "metrics.jsonl, run.json, params.safetensors) and prints that directory last");
  auto options = std::make_shared<TrainCommandOptions>();
  command->add_option("config", options->config, "The TOML config (see examples/*.toml)")
      ->required();
  command
      ->add_option("--set", options->overrides,
                   "Override one key: --set optim.lr=3e-4 --set train.epochs=1 (repeatable); one "
                   "field of one layer: --set model.layers[0].remat=save_nothing")
      ->type_name("SECTION.KEY=VALUE");
  command->add_flag("--no-progress", options->no_progress,
                    "Plain progress lines even on a terminal (every train.log_every steps)");
  command->add_flag("--quiet", options->quiet,
                    "Print only the final summary (no config echo, no progress)");
  command
      ->add_option("--trace-steps", options->trace_steps,
                   "Write a Chrome trace of train steps A to B (1-based, inclusive) to "
                   "<run dir>/trace.json, for ui.perfetto.dev: a track per device with each "
                   "kernel by its name stack, the data loader, the savepoint writer, host "
                   "synchronizations and live bytes; the run's roofline and memory report "
                   "then come from these steps (docs/profiling.md)")
      ->type_name("A-B");
  add_debug_nonfinite_flag(*command, *options);
  command
      ->add_option("--memory-budget", options->memory_budget,
                   "Fit the train step in this much memory (train.memory_budget): before the "
                   "first step, kiln picks the fewest micro-batches per update (and for a GPT-2 "
                   "the least recomputation) whose step the memory planner expects to fit, "
                   "prints the plans it tried, and refuses when none fits (docs/memory.md)")
      ->type_name("SIZE");
  command->add_flag("--print-config", options->print_config,
                    "Print the resolved config (defaults and overrides applied) and exit");
  command->footer(
      "Exit status: 0 when the run completed; 1 on an error (usage, config, data, model, "
      "files); 2 when a non-finite loss, gradient or evaluation, or too many skipped steps, "
      "stopped the run; 130 / 143 / 129 when SIGINT / SIGTERM / SIGHUP interrupted it "
      "(run.json says interrupted; a savepoint of the state after the last step is written and "
      "the message says how to resume). See docs/training.md.");
  return [options] { return run_train(*options); };
}

Runner add_resume_command(CLI::App& app) {
  auto* command = app.add_subcommand(
      "resume",
      "Continue a run from its latest savepoint, in its run directory, as if it had never "
      "stopped (bit for bit); a completed run is left alone");
  auto options = std::make_shared<TrainCommandOptions>();
  command->add_option("run_dir", options->config, "The run directory (runs/<experiment>/<run-id>)")
      ->required();
  command
      ->add_option("--set", options->overrides,
                   "Override one key of the run's config.toml (changes the run identity: needs "
                   "--allow-changed)")
      ->type_name("SECTION.KEY=VALUE");
  command->add_flag("--allow-changed", options->allow_changed,
                    "Continue even though the config, data, kiln version or kernels differ from "
                    "the savepoint's (each difference is printed and recorded in run.json)");
  command->add_flag("--no-progress", options->no_progress,
                    "Plain progress lines even on a terminal (every train.log_every steps)");
  command->add_flag("--quiet", options->quiet, "Print only the final summary");
  add_debug_nonfinite_flag(*command, *options);
  command
      ->add_option(
          "--trace-steps", options->trace_steps,
          "Write a Chrome trace of train steps A to B of the resumed run (1-based, inclusive) to "
          "<run dir>/trace.json, for ui.perfetto.dev: a track per device with each "
          "kernel by its name stack, the data loader, the savepoint writer, host "
          "synchronizations and live bytes; the run's roofline and memory report "
          "then come from these steps (docs/profiling.md)")
      ->type_name("A-B");

  command->footer(
      "Exit status as for `kiln train`: 0 when the run completed (or had already), 1 on an "
      "error (a changed run identity, a run still running, no run directory), 2 non-finite, "
      "130 / 143 interrupted again. See docs/savepoints.md.");
  return [options] { return run_resume(*options); };
}

}  // namespace kiln::cli
