// The training configuration: a typed schema read from TOML. Every key is declared once in
// the schema (name, type, default, allowed values, help), and everything else derives from
// it: parsing with line/column errors, unknown keys rejected with a did-you-mean,
// `--set section.key=value` overrides, the resolved config written back as TOML, and the
// config reference in docs/training.md (a test keeps the two in step).
#pragma once

#include <cstdint>
#include <filesystem>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "kiln/train.h"

namespace kiln::train {

struct ExperimentConfig {
  std::string name = "default";
  uint64_t seed = 0;
  std::string runs_dir = "runs";
  friend bool operator==(const ExperimentConfig&, const ExperimentConfig&) = default;
};

// [data.features]: the contract every training and test record's features must meet.
struct FeaturesConfig {
  std::string dtype = "any";   // the dtype the source holds, or any
  std::vector<int64_t> shape;  // per record; empty: any (fashion_mnist: [28, 28])
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  bool finite = true;
  friend bool operator==(const FeaturesConfig&, const FeaturesConfig&) = default;
};

// [data.label]: the allowed label set and the class balance.
struct LabelConfig {
  int64_t num_classes = 0;  // 0: fashion_mnist's 10, or the number of label_names
  int64_t min_per_class = 0;
  friend bool operator==(const LabelConfig&, const LabelConfig&) = default;
};

// [data.augment]: per-example augmentation of training images.
struct AugmentConfig {
  int64_t crop_padding = 0;  // > 0: random crop of the image padded by this many pixels
  bool horizontal_flip = false;
  friend bool operator==(const AugmentConfig&, const AugmentConfig&) = default;
};

struct DataConfig {
  std::string dataset = "fashion_mnist";  // fashion_mnist, idx, npy, csv, text, tokens
  std::string dir = "/usr/share/datasets/fashion-mnist";
  std::string train_features, train_labels, test_features, test_labels;  // idx, npy
  std::string train_file, test_file;                                     // csv, text, tokens
  int64_t context = 0;  // text, tokens: tokens per example (the model's input length T)
  double test_fraction = 0.2;
  std::string test_split = "last";  // last, shuffled
  uint64_t split_seed = 0;
  bool header = true;
  int64_t skip_lines = 0;
  std::vector<std::string> feature_columns;
  std::string label_column = "label";
  std::vector<std::string> label_names;
  std::string on_violation = "error";
  std::string normalize = "auto";
  int64_t train_limit = 0;  // use only the first N training examples (0: all)
  int64_t test_limit = 0;   // use only the first N test examples (0: all)
  int64_t workers = 2;      // loader threads (any number gives the same batches)
  int64_t prefetch = 4;     // batches assembled ahead of the step
  FeaturesConfig features;
  LabelConfig label;
  AugmentConfig augment;
  friend bool operator==(const DataConfig&, const DataConfig&) = default;
};

// [model.gpt2]: the sizes of a GPT-2 (nn::Gpt2Config); the defaults are Gpt2Config::small().
struct Gpt2ModelConfig {
  int64_t layers = 4;
  int64_t heads = 4;
  int64_t channels = 256;
  int64_t vocab_size = 256;
  int64_t padded_vocab_size = 0;  // 0: vocab_size rounded up to a multiple of 128
  int64_t max_context = 256;
  std::string remat = "none";       // none, blocks, blocks_save_dots (nn::Gpt2Remat)
  std::string attention = "plain";  // plain or flash (nn::AttentionImplementation)
  friend bool operator==(const Gpt2ModelConfig&, const Gpt2ModelConfig&) = default;
};

struct ModelConfig {
  std::string kind = "sequential";  // sequential ([[model.layers]]) or gpt2 ([model.gpt2])
  std::vector<LayerConfig> layers;
  Gpt2ModelConfig gpt2;
  // Mixed precision (docs/precision.md): the dtype the layers compute in; params stay f32
  // (the master copy the optimizer updates), the loss and its reduction are f32.
  std::string compute_dtype = "f32";  // f32, bf16 or f16 (f16 with loss scaling)
  friend bool operator==(const ModelConfig&, const ModelConfig&) = default;
};

struct OptimConfig {
  std::string name = "adamw";  // sgd, momentum, nesterov, adam, adamw, rmsprop
  double lr = 1e-3;
  // constant, linear, cosine, warmup_cosine, exponential, piecewise
  std::string schedule = "constant";
  int64_t warmup_steps = 0;
  double end_lr = 0;        // linear / warmup_cosine / cosine (as alpha = end_lr / lr)
  double decay_rate = 0.5;  // exponential: lr * decay_rate^(step / transition_steps)
  int64_t transition_steps = 1000;
  // piecewise: the steps at which the learning rate is multiplied by decay_rate
  std::vector<int64_t> boundaries;
  double b1 = 0.9;
  double b2 = 0.999;
  double eps = 1e-8;
  double momentum = 0.9;           // momentum, nesterov; rmsprop's decay
  double weight_decay = 0.01;      // adamw
  std::string decay_mask = "all";  // adamw: all, or matrices (rank >= 2 leaves only)
  double clip_global_norm = 0;     // 0: no clipping
  friend bool operator==(const OptimConfig&, const OptimConfig&) = default;
};

struct TrainLoopConfig {
  int64_t epochs = 3;
  int64_t batch_size = 128;
  // Micro-batches of batch_size per update (gradient accumulation): see update_config.
  int64_t accumulate = 1;
  // A size such as "2GiB" (empty: none): before the first step, the fewest micro-batches
  // (and for a GPT-2 the least recomputation) whose train step the memory planner expects
  // to fit (memory_fit.h, docs/memory.md).
  std::string memory_budget;
  int64_t eval_batch_size = 1000;
  int64_t log_every = 100;            // plain progress lines every N steps (no terminal)
  std::string on_nonfinite = "stop";  // stop or skip
  int64_t max_skipped_steps = 10;     // skip: fail once more steps than this were skipped
  // Loss scaling (docs/precision.md): auto (dynamic with f16 compute, none otherwise),
  // dynamic, fixed (always loss_scale_initial) or none.
  std::string loss_scale = "auto";
  double loss_scale_initial = 32768;  // 2^15, as jmp
  int64_t loss_scale_growth_interval = 2000;
  double loss_scale_backoff = 0.5;
  double loss_scale_growth = 2;
  // A skipped step advances the optimizer's step count (the learning-rate schedule).
  bool skipped_steps_advance_schedule = false;
  int64_t max_steps = 0;        // stop after N steps in total (0: run all epochs)
  bool flush_denormals = true;  // subnormal floats as zero in the jitted steps
  bool drop_remainder = false;  // leave out each epoch's last, smaller batch
  bool pad_remainder = false;   // or pad it to batch_size with masked-out rows
  // Savepoints (docs/savepoints.md): every N steps and/or every S seconds (0: not for that
  // reason), always at the end and on SIGINT/SIGTERM.
  int64_t savepoint_every = 500;
  double savepoint_every_seconds = 0;
  int64_t savepoint_keep_last = 3;          // keep the newest K
  int64_t savepoint_keep_every = 0;         // and those whose step is a multiple of M (0: none)
  bool savepoint_async = true;              // write on a background thread
  std::string on_savepoint_error = "stop";  // stop or continue
  friend bool operator==(const TrainLoopConfig&, const TrainLoopConfig&) = default;
};

// [tracking]: where the run is recorded besides its directory. Not part of the run
// identity: recording a run elsewhere does not change what it computes.
struct TrackingConfig {
  bool catalog = true;            // runs/kiln.db
  bool tensorboard = true;        // event files in the run directory
  std::string mlflow_uri;         // empty: no MLflow mirror
  std::string mlflow_experiment;  // empty: experiment.name
  double wait_seconds = 10;       // at the end, how long to wait for unsent records
  friend bool operator==(const TrackingConfig&, const TrackingConfig&) = default;
};

// [mesh]: data-parallel training over logical devices (docs/training.md, *Data parallel*).
struct MeshConfig {
  int64_t data = 0;           // devices on the `data` axis (0: one device, no mesh)
  int64_t chunks = 4;         // equal parts of each batch, the unit of the gradient's sum order
  bool shard_params = false;  // FSDP: params and optimizer state split over the devices
  int64_t model = 1;          // devices on the `model` axis (tensor-parallel dense layers)
  friend bool operator==(const MeshConfig&, const MeshConfig&) = default;
};

// [telemetry]: per-layer statistics every N steps (docs/training.md, *Telemetry*).
struct TelemetryConfig {
  int64_t every = 0;                // steps between two; 0: none
  double dead_warning = 0.5;        // warn when more of a ReLU's units than this are dead
  double saturation_warning = 0.5;  // ... or more of a sigmoid's / tanh's outputs saturated
  friend bool operator==(const TelemetryConfig&, const TelemetryConfig&) = default;
};

// [privacy]: differentially private training, DP-SGD (docs/privacy.md, *Private training*).
// Each step samples every training example with probability q = train.batch_size / N
// (Poisson sampling), clips each sampled example's gradient to L2 norm clip_norm, adds
// Gaussian noise of standard deviation noise_multiplier x clip_norm to their sum and
// divides by train.batch_size (the expected batch).
struct PrivacyConfig {
  bool enabled = false;
  double noise_multiplier = 1.0;    // sigma
  double clip_norm = 1.0;           // C
  double delta = 1e-5;              // the delta epsilon is reported at
  double max_epsilon = 0;           // stop before a step would spend more (0: no budget)
  int64_t examples_per_chunk = 32;  // per-example gradients held at once
  std::string accountant = "rdp";   // rdp or pld: what epsilon and the budget are counted by
  friend bool operator==(const PrivacyConfig&, const PrivacyConfig&) = default;
};

struct TrainConfig {
  ExperimentConfig experiment;
  DataConfig data;
  ModelConfig model;
  OptimConfig optim;
  TrainLoopConfig train;
  TrackingConfig tracking;
  MeshConfig mesh;
  TelemetryConfig telemetry;
  PrivacyConfig privacy;
  std::string source;  // the file it was read from, for messages
  // Compares `source` and the layers' lines too.
  friend bool operator==(const TrainConfig&, const TrainConfig&) = default;
};

// The largest config file load_config reads (1 MiB).
inline constexpr size_t kMaxConfigBytes = size_t{1} << 20;

// Reads and validates `path`, then applies each "section.key=value" override in order
// (the value is parsed as a TOML value; a bare word is a string, and a string key takes
// the text as written unless it is quoted). Errors are kiln::Error naming the file, line
// and column, the key path, and what was expected.
TrainConfig load_config(const std::filesystem::path& path,
                        const std::vector<std::string>& overrides = {});
// The same from text (`source_name` is used in messages).
TrainConfig parse_config(const std::string& text, const std::string& source_name,
                         const std::vector<std::string>& overrides = {});

// Every key with its value, as TOML that load_config reads back to an equal config.
std::string to_toml(const TrainConfig& config);
// The part of the resolved config that makes the run identity and run id: to_toml without
// the sections that only say where the run is recorded ([tracking]) and without comments
// (a key's help can be reworded without changing any run's identity).
std::string identity_toml(const TrainConfig& config);

// The config a run's steps execute: with train.accumulate = K > 1, one update takes a batch
// of K x batch_size rows split into K x mesh.chunks chunks on a mesh, whose gradients are
// added in the canonical chunk order: the accumulation of K micro-batches, and the same bits
// as that batch and chunk count written out (docs/training.md, *Gradient accumulation*).
// Without a mesh the batch is K x batch_size rows and train.accumulate stays K: the one-device
// step splits it into K chunks (StepOptions::accumulate), the same bits as a mesh of one
// device with K chunks. Each chunk's activations and gradient are freed before the next
// one's, so memory follows the micro-batch. The run's identity and config.toml keep the
// config as written; accumulate = 1 gives `config` unchanged.
TrainConfig update_config(const TrainConfig& config);

// train.loss_scale resolved: "dynamic", "fixed" or "none" ("auto" is dynamic with
// model.compute_dtype = "f16", none otherwise).
std::string resolved_loss_scale(const TrainConfig& config);

// The reference table for docs/training.md: one row per key (section, key, type, default,
// meaning), generated from the schema.
std::string schema_markdown();

}  // namespace kiln::train
