// The `kiln` command: parses the command line and runs one subcommand. User errors
// (kiln::Error) print their message and HINT and exit with status 1.
#include <cstdio>
#include <iostream>

#include "cli/commands.h"
#include "kiln/error.h"

int main(int argc, char** argv) {
  CLI::App app{"kiln: train neural networks fast, at any scale, reproducibly.", "kiln"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "kiln 0.1.0");
  app.footer(
      "Environment:\n"
      "  KILN_CPU_DEVICES=N      split the CPU into N logical devices (default 1)\n"
      "  KILN_COMPUTE_THREADS=N  threads in the shared compute pool (default: one per core)\n"
      "  KILN_KERNELS=ref        run the reference kernels instead of the fast ones\n"
      "  KILN_ALLOCATOR_CACHE_MB=M  freed memory each device keeps for reuse (default 2048)\n"
      "  KILN_LOG_RECOMPILES=1   print every jit compilation and why\n"
      "Run `kiln <command> --help` for a command's options.");
  kiln::cli::Runner devices = kiln::cli::add_devices_command(app);
  kiln::cli::Runner bench = kiln::cli::add_bench_command(app);
  kiln::cli::Runner train = kiln::cli::add_train_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error);
  }
  try {
    if (app.got_subcommand("devices")) return devices();
    if (app.got_subcommand("bench")) return bench();
    if (app.got_subcommand("train")) return train();
  } catch (const kiln::Error& error) {
    std::fprintf(stderr, "error: %s\n", error.what());
    return 1;
  } catch (const std::exception& error) {
    // Not kiln's own errors (a file system or allocation failure): still a message and a
    // non-zero status rather than std::terminate.
    std::fprintf(stderr, "error: %s\n", error.what());
    return 1;
  }
  return 0;
}
