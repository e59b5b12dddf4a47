// `kiln generate RUN --prompt TEXT`: text from a trained language-model run
// (train/text_generation.h; docs/transformer.md, *Sampling*).
#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "train/text_generation.h"

namespace kiln::cli {
namespace {

struct GenerateCommandOptions {
  std::string run;
  train::GenerateOptions generate;
};

int run_generate(const GenerateCommandOptions& options) {
  // The prompt first, then each token as it is drawn: a long sample shows progress.
  std::fwrite(options.generate.prompt.data(), 1, options.generate.prompt.size(), stdout);
  std::fflush(stdout);
  train::generate_text(options.run, options.generate, [](std::string_view piece) {
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
  });
  std::fputc('\n', stdout);
  return 0;
}

}  // namespace

Runner add_generate_command(CLI::App& app) {
  auto* command = app.add_subcommand(
      "generate", "Continue a prompt with text sampled from a trained language-model run");
  command->footer(
      "Loads the run's final weights (params.safetensors, checked against run.json) and its\n"
      "config, and draws each new token from the model's distribution given the prompt and\n"
      "the tokens drawn so far, within the context the model was trained on. The same run,\n"
      "prompt, options and seed always give the same text. Runs of model.kind = \"gpt2\" on a\n"
      "text dataset (byte tokens) only. See docs/transformer.md.\n"
      "Examples:\n"
      "  kiln generate runs/gpt2_small/RUN --prompt \"And God said\"\n"
      "  kiln generate runs/gpt2_small/RUN --prompt \"In the beginning\" --tokens 400 "
      "--temperature 0");
  auto options = std::make_shared<GenerateCommandOptions>();
  command->add_option("RUN", options->run, "The run directory (<runs_dir>/<experiment>/<run-id>)")
      ->required()
      ->check(CLI::ExistingDirectory);
  command->add_option("-p,--prompt", options->generate.prompt, "The text to continue")->required();
  command->add_option("-n,--tokens", options->generate.tokens, "New tokens to draw (bytes)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  command
      ->add_option("-t,--temperature", options->generate.temperature,
                   "Divides the logits: below 1 safer, above 1 more varied; 0 always takes the "
                   "likeliest token")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 100.0));
  command
      ->add_option("-k,--top-k", options->generate.top_k,
                   "Draw among the k likeliest tokens only (0: all)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  command->add_option("--seed", options->generate.seed, "Seeds the draws")->capture_default_str();
  return [options] { return run_generate(*options); };
}

}  // namespace kiln::cli
