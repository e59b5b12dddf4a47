// kiln's command line (kiln::train::command_line_main, kiln/train.h): parses the command line
// and runs one subcommand; the `kiln` program is its main() (kiln_main.cc), and so may be a
// program of a user's that registered layer types of its own. Exit status (also
// in docs/training.md): 0 success; 1 an error (a usage error, or a kiln::Error: config,
// data, model, file system); 2 a run stopped by a non-finite loss or gradient; 3 `kiln data
// validate` found contract violations; 130 / 143 / 129 a
// run interrupted by SIGINT / SIGTERM / SIGHUP (128 + the signal, as shells report it).
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "base/edit_distance.h"
#include "cli/commands.h"
#include "cli/output.h"
#include "dist/processes.h"
#include "kiln/error.h"
#include "kiln/train.h"
#include "kiln/version.h"

namespace {

// CLI11 exits with its own codes (105-114); kiln documents 0 for --help and --version and
// 1 for every other usage error, so scripts see the same codes whatever went wrong.
int usage_exit(CLI::App& app, const CLI::ParseError& error) {
  int code = app.exit(error);  // prints the message (or the help) as CLI11 does
  return code == static_cast<int>(CLI::ExitCodes::Success) ? 0 : 1;
}

// `kiln trian`: CLI11 would say only that an argument was not expected. An unknown first
// word that is not an option is a mistyped command: name it and suggest the closest.
bool unknown_command(const CLI::App& app, int argc, char** argv) {
  if (argc < 2) return false;
  std::string_view word = argv[1];
  if (word.empty() || word.front() == '-') return false;
  std::vector<std::string> names;
  for (const CLI::App* command : app.get_subcommands({})) names.push_back(command->get_name());
  for (const std::string& name : names) {
    if (name == word) return false;
  }
  std::vector<std::string_view> views(names.begin(), names.end());
  std::string_view guess = kiln::closest_match(word, views);
  std::string list;
  for (const std::string& name : names) list += (list.empty() ? "" : ", ") + name;
  std::string message = "error: unknown command '" + std::string(word) + "'";
  if (!guess.empty()) message += "; did you mean '" + std::string(guess) + "'?";
  std::fprintf(stderr, "%s\nthe commands are %s (kiln --help)\n", message.c_str(), list.c_str());
  return true;
}

// "rank 1: " before an error in a job of several ranks, whose messages interleave.
std::string rank_prefix() {
  return kiln::dist::size() > 1 ? "rank " + std::to_string(kiln::dist::rank()) + ": " : "";
}

}  // namespace

// Runs the command. In a job of several ranks (mpirun), an error on this rank stops them
// all: the others would otherwise wait for it at their next exchange. An ending that every
// rank reaches together (dist::exit_together) finishes normally on each instead.
int run_command(int argc, char** argv);

namespace {

// A command whose output is its result (`runs list --json`, `data validate --json`) has
// failed if the output could not be written: a full disk must not pass for an empty
// result. A reader that closed the pipe early (`kiln runs list | head -1`) ends the
// command quietly with 141, as SIGPIPE would have. A run's own printout goes through
// print_best_effort and never counts here: a run is never failed by its printout.
int check_output_written(int code) {
  int error = kiln::cli::finish_output();
  if (error == 0 || code != 0) return code;
  if (error == EPIPE) return 128 + SIGPIPE;
  std::fprintf(stderr, "%serror: cannot write the output to stdout: %s\n", rank_prefix().c_str(),
               std::strerror(error));
  return 1;
}

}  // namespace

int kiln::train::command_line_main(int argc, char** argv) {
  // A closed pipe (`kiln train ... | head -3`) is a write error to handle, not a reason to
  // die: killed by SIGPIPE, a run would stay "running" with no savepoint.
  std::signal(SIGPIPE, SIG_IGN);
  kiln::dist::start_if_launched(&argc, &argv);
  int code = check_output_written(run_command(argc, argv));
  if (code != 0 && kiln::dist::size() > 1 && !kiln::dist::exiting_together()) {
    kiln::dist::abort_job(code);
  }
  kiln::dist::stop();
  return code;
}

int run_command(int argc, char** argv) {
  CLI::App app{"kiln: train neural networks fast, at any scale, reproducibly.", "kiln"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("kiln ") + kiln::kVersion);
  app.footer(
      "Environment:\n"
      "  KILN_CPU_DEVICES=N      split the CPU into N logical devices (default 1)\n"
      "  KILN_COMPUTE_THREADS=N  threads in the shared compute pool (default: one per core)\n"
      "  KILN_KERNELS=ref        run the reference kernels instead of the fast ones (the only\n"
      "                          value; anything else is an error)\n"
      "  KILN_ALLOCATOR_CACHE_MB=M  freed memory each device keeps for reuse (default 2048)\n"
      "  KILN_LOG_RECOMPILES=1   print every jit compilation and why\n"
      "  KILN_PALLAS=interpret|compiled  every Pallas kernel in that mode (for debugging one)\n"
      "  KILN_PALLAS_DOUBLE_BUFFER=on|off  every compiled kernel's block copies ahead\n"
      "Exit status: 0 success, 1 an error (usage, config, data, model, files), 2 a run stopped\n"
      "by a non-finite loss or gradient, 3 `kiln data validate` found contract violations,\n"
      "130 / 143 / 129 a run interrupted by SIGINT / SIGTERM / SIGHUP.\n"
      "Run `kiln <command> --help` for a command's options.");
  kiln::cli::Runner devices = kiln::cli::add_devices_command(app);
  kiln::cli::Runner bench = kiln::cli::add_bench_command(app);
  kiln::cli::Runner train = kiln::cli::add_train_command(app);
  kiln::cli::Runner data = kiln::cli::add_data_command(app);
  kiln::cli::Runner resume = kiln::cli::add_resume_command(app);
  kiln::cli::Runner runs = kiln::cli::add_runs_command(app);
  kiln::cli::Runner report = kiln::cli::add_report_command(app);
  kiln::cli::Runner generate = kiln::cli::add_generate_command(app);
  kiln::cli::Runner export_run = kiln::cli::add_export_command(app);
  kiln::cli::Runner predict = kiln::cli::add_predict_command(app);
  kiln::cli::Runner verify = kiln::cli::add_verify_command(app);
  kiln::cli::Runner reproduce = kiln::cli::add_reproduce_command(app);
  kiln::cli::Runner kernels = kiln::cli::add_kernels_command(app);
  kiln::cli::Runner privacy = kiln::cli::add_privacy_command(app);
  if (unknown_command(app, argc, argv)) return 1;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return usage_exit(app, error);
  }
  try {
    if (app.got_subcommand("devices")) return devices();
    if (app.got_subcommand("bench")) return bench();
    if (app.got_subcommand("train")) return train();
    if (app.got_subcommand("data")) return data();
    if (app.got_subcommand("resume")) return resume();
    if (app.got_subcommand("runs")) return runs();
    if (app.got_subcommand("report")) return report();
    if (app.got_subcommand("generate")) return generate();
    if (app.got_subcommand("export")) return export_run();
    if (app.got_subcommand("predict")) return predict();
    if (app.got_subcommand("verify")) return verify();
    if (app.got_subcommand("reproduce")) return reproduce();
    if (app.got_subcommand("kernels")) return kernels();
    if (app.got_subcommand("privacy")) return privacy();
  } catch (const kiln::Error& error) {
    std::fprintf(stderr, "%serror: %s\n", rank_prefix().c_str(), error.what());
    return 1;
  } catch (const std::exception& error) {
    // Not kiln's own errors (a file system or allocation failure): still a message and a
    // non-zero status rather than std::terminate.
    std::fprintf(stderr, "%serror: %s\n", rank_prefix().c_str(), error.what());
    return 1;
  }
  return 0;
}
