// The schema tables of the training config (config_schema.h): one row per key, bound to
// its struct member, plus the layer types and their fields. To add a key: add the member
// to config.h and one row here; the parser, to_toml and docs/training.md follow.
#include "train/config_schema.h"

#include <algorithm>

#include "train/builders.h"
#include "train/layer_registry.h"

namespace kiln::train::schema {
namespace {

template <class T>
constexpr Type type_of() {
  if constexpr (std::is_same_v<T, std::string>) return Type::kString;
  if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, uint64_t>) return Type::kInteger;
  if constexpr (std::is_same_v<T, double>) return Type::kFloat;
  if constexpr (std::is_same_v<T, bool>) return Type::kBool;
  if constexpr (std::is_same_v<T, std::vector<int64_t>>) return Type::kIntegerArray;
  if constexpr (std::is_same_v<T, std::vector<std::string>>) return Type::kStringArray;
}

// TOML integers are signed 64-bit; the seed is unsigned but kept to that range.
template <class T>
Value to_value(const T& value) {
  if constexpr (std::is_same_v<T, uint64_t>) {
    return static_cast<int64_t>(value);
  } else {
    return value;
  }
}

template <class T>
T from_value(const Value& value) {
  if constexpr (std::is_same_v<T, uint64_t>) {
    return static_cast<uint64_t>(std::get<int64_t>(value));
  } else {
    return std::get<T>(value);
  }
}

// A section key bound to `config.*section.*member`.
template <class S, class T>
Key key(S TrainConfig::*section, T S::*member, std::string_view name, std::string_view help,
        Constraint constraint = {}, std::vector<std::string_view> aliases = {},
        std::function<Value(const TrainConfig&)> identity_get = {}) {
  Key key;
  key.identity_get = std::move(identity_get);
  key.name = name;
  key.type = type_of<T>();
  key.help = help;
  key.constraint = std::move(constraint);
  key.aliases = std::move(aliases);
  key.get = [=](const TrainConfig& config) { return to_value(config.*section.*member); };
  key.set = [=](TrainConfig& config, const Value& value) {
    config.*section.*member = from_value<T>(value);
  };
  return key;
}

// A key of a table inside a section: `config.*section.*table.*member` ([data.features]).
template <class S, class N, class T>
Key nested_key(S TrainConfig::*section, N S::*table, T N::*member, std::string_view name,
               std::string_view help, Constraint constraint = {},
               std::vector<std::string_view> aliases = {}) {
  Key key;
  key.name = name;
  key.aliases = std::move(aliases);
  key.type = type_of<T>();
  key.help = help;
  key.constraint = std::move(constraint);
  key.get = [=](const TrainConfig& config) { return to_value(config.*section.*table.*member); };
  key.set = [=](TrainConfig& config, const Value& value) {
    config.*section.*table.*member = from_value<T>(value);
  };
  return key;
}

template <class T>
LayerField layer_field(T LayerConfig::*member, std::string_view name, std::string_view help,
                       Constraint constraint, std::string_view default_doc = {}) {
  LayerField field;
  field.name = name;
  field.type = type_of<T>();
  field.help = help;
  field.constraint = std::move(constraint);
  field.default_doc = default_doc;
  field.get = [=](const LayerConfig& layer) { return to_value(layer.*member); };
  field.set = [=](LayerConfig& layer, const Value& value) { layer.*member = from_value<T>(value); };
  return field;
}

Constraint one_of(std::vector<std::string_view> choices) {
  Constraint constraint;
  constraint.choices = std::move(choices);
  return constraint;
}

Constraint at_least(double min) {
  Constraint constraint;
  constraint.min = min;
  return constraint;
}

// [0, 1): rates, decays and moment coefficients.
Constraint fraction() {
  Constraint constraint = at_least(0);
  constraint.max = 1;
  constraint.max_exclusive = true;
  return constraint;
}

// The largest value of each kind of size a config can set. They keep every product the
// trainer forms (steps = epochs x batches, a layer's output elements) far from int64
// overflow, and a typo such as features = 9223372036854775807 an error naming the key
// rather than an allocation failure deep in a kernel.
constexpr double kMaxFeatures = 65536;  // dense units, conv2d channels
constexpr double kMaxWindow = 1024;     // kernel_size, window and strides entries
constexpr double kMaxLayers = 4096;     // remat_span
constexpr double kMaxEpochs = 1e6;
constexpr double kMaxBatch = 1 << 20;  // batch_size, eval_batch_size
// max_steps, warmup, transitions, boundaries: the optimizer counts steps in i32.
constexpr double kMaxSteps = 2147483647;
// Learning rates, decays and the like are f32 in the step: [1e-30, 1e30] is well inside
// its normal range, so no value silently becomes 0, a subnormal or an infinity.
constexpr double kMinF32 = 1e-30;
constexpr double kMaxF32 = 1e30;

Constraint at_most(Constraint constraint, double max) {
  constraint.max = max;
  return constraint;
}

// A float in (0, 1e30], at least 1e-30.
Constraint positive_f32() {
  Constraint constraint = at_least(kMinF32);
  constraint.max = kMaxF32;
  return constraint;
}

// A float in [0, 1e30] that is 0 or at least 1e-30.
Constraint non_negative_f32() {
  Constraint constraint = at_most(at_least(0), kMaxF32);
  constraint.min_nonzero = kMinF32;
  return constraint;
}

Constraint text(bool dir_name = false) {
  Constraint constraint;
  constraint.non_empty = true;
  constraint.dir_name = dir_name;
  constraint.path = !dir_name;
  return constraint;
}

// An optional path: empty, or a path.
Constraint optional_path() {
  Constraint constraint = text();
  constraint.may_be_empty = true;
  return constraint;
}

Constraint any_bound() {
  Constraint constraint;
  constraint.allow_infinite = true;
  return constraint;
}

Constraint pair_of_positive() {
  Constraint constraint = at_most(at_least(1), kMaxWindow);
  constraint.length = 2;
  return constraint;
}

// mesh.data in the run identity: any mesh size computes the same bits; none does not.
Value data_parallel(const TrainConfig& config) {
  return std::string(config.mesh.data > 0 ? "any" : "none");
}

// mesh.shard_params in the run identity: split or replicated, the step computes the same
// bits.
Value sharded_or_not(const TrainConfig& /*config*/) {
  return std::string("any");
}

Section experiment_section() {
  using C = TrainConfig;
  return {"experiment",
          "What the run is called and where its directory goes.",
          {key(&C::experiment, &ExperimentConfig::name, "name",
               "the run directory is `<runs_dir>/<name>/<run-id>/`", text(true)),
           key(&C::experiment, &ExperimentConfig::seed, "seed",
               "seeds parameter init, shuffling and dropout: same seed, same weights", at_least(0),
               {"random_seed", "rng_seed"}),
           key(&C::experiment, &ExperimentConfig::runs_dir, "runs_dir",
               "where run directories are created (relative to the working directory)", text(),
               {"output_dir", "log_dir", "out_dir"})}};
}

// data's keys for what happens to bad records, the preprocessing, and the loader.
std::vector<Key> data_loading_keys() {
  using C = TrainConfig;
  return {key(&C::data, &DataConfig::on_violation, "on_violation",
              "a record that violates a contract: `error` stops before training, `drop` leaves it "
              "out (counted in run.json)",
              one_of({"error", "drop"})),
          key(&C::data, &DataConfig::normalize, "normalize",
              "features to f32: `divide_255`, `standardize` (per element, the training split's "
              "mean and deviation), `none`, or `auto` (divide_255 for u8, standardize for csv, "
              "else none)",
              one_of({"auto", "none", "divide_255", "standardize"}), {"normalise", "preprocess"}),
          key(&C::data, &DataConfig::train_limit, "train_limit",
              "use only the first N training examples (0: all); the rest of the file is not read",
              at_least(0)),
          key(&C::data, &DataConfig::test_limit, "test_limit",
              "use only the first N test examples (0: all); the rest of the file is not read",
              at_least(0)),
          key(&C::data, &DataConfig::workers, "workers",
              "loader threads assembling training batches (any number gives the same batches)",
              at_most(at_least(1), 64), {"num_workers"}),
          key(&C::data, &DataConfig::prefetch, "prefetch",
              "training batches assembled ahead of the step (bounds the loader's memory)",
              at_most(at_least(1), 1024), {"prefetch_factor"})};
}

// data's keys for a csv source: the test split, the header, the columns.
std::vector<Key> data_csv_keys() {
  using C = TrainConfig;
  return {key(&C::data, &DataConfig::test_split, "test_split",
              "csv without test_file: the test records are the `last` ones of the file, or a "
              "`shuffled` choice keyed by split_seed (for files sorted by class)",
              one_of({"last", "shuffled"})),
          key(&C::data, &DataConfig::split_seed, "split_seed",
              "csv with test_split = `shuffled`: which records form the test split", at_least(0)),
          key(&C::data, &DataConfig::header, "header",
              "csv: the first row names the columns (false: columns are named `0`, `1`, ...)"),
          key(&C::data, &DataConfig::skip_lines, "skip_lines",
              "csv: lines skipped before the header or the first record", at_most(at_least(0), 1e6),
              {"skiprows", "skip_rows"}),
          key(&C::data, &DataConfig::feature_columns, "feature_columns",
              "csv: the columns read as features, in this order (empty: every column but the "
              "label)",
              {}, {"columns", "inputs"}),
          key(&C::data, &DataConfig::label_column, "label_column", "csv: the column of the labels",
              text(), {"target", "label_col"}),
          key(&C::data, &DataConfig::label_names, "label_names",
              "csv: labels written as text; class i is the i-th name (empty: labels are integers)",
              {}, {"classes", "class_names"})};
}

Section data_section() {
  using C = TrainConfig;
  Section section{
      "data",
      "The dataset: where it is read from, the contracts it must meet (`[data.features]`, "
      "`[data.label]`), what happens to records that violate them, and the preprocessing. "
      "See docs/data.md.",
      {key(&C::data, &DataConfig::dataset, "dataset",
           "the source: `fashion_mnist` (its four IDX files in `dir`), `idx` or `npy` (a features "
           "and a labels file per split), `csv` (columns of one or two files), `text` (a text "
           "file read as bytes) or `tokens` (a token file), cut into examples of `context` "
           "tokens whose labels are the tokens that follow (docs/transformer.md)",
           one_of({"fashion_mnist", "idx", "npy", "csv", "text", "tokens"}), {"source", "format"}),
       key(&C::data, &DataConfig::dir, "dir",
           "fashion_mnist: the directory holding the four IDX files (Debian package "
           "`dataset-fashion-mnist`)",
           text(), {"path", "data_dir", "root"}),
       key(&C::data, &DataConfig::train_features, "train_features",
           "idx, npy: the training features (first axis: records)", optional_path()),
       key(&C::data, &DataConfig::train_labels, "train_labels",
           "idx, npy: the training labels, one integer per record", optional_path()),
       key(&C::data, &DataConfig::test_features, "test_features", "idx, npy: the test features",
           optional_path()),
       key(&C::data, &DataConfig::test_labels, "test_labels", "idx, npy: the test labels",
           optional_path()),
       key(&C::data, &DataConfig::train_file, "train_file",
           "csv: the file with a header row (the training records, and the test records unless "
           "test_file is set); text, tokens: the corpus",
           optional_path(), {"csv", "file"}),
       key(&C::data, &DataConfig::test_file, "test_file",
           "csv, text, tokens: a file of test records (empty: the last test_fraction of "
           "train_file)",
           optional_path()),
       key(&C::data, &DataConfig::context, "context",
           "text, tokens: tokens per example, the model's input length (examples do not "
           "overlap: example i reads tokens [i * context, (i + 1) * context])",
           at_most(at_least(0), 1 << 20), {"block_size", "seq_len", "sequence_length"}),
       key(&C::data, &DataConfig::test_fraction, "test_fraction",
           "csv, text, tokens without test_file: the fraction of train_file's records (or "
           "tokens), from its end, that form the test split",
           [] {
             Constraint constraint = fraction();
             constraint.min_exclusive = true;
             return constraint;
           }(),
           {"test_size", "validation_split"})}};
  for (const std::vector<Key>& more : {data_csv_keys(), data_loading_keys()}) {
    section.keys.insert(section.keys.end(), more.begin(), more.end());
  }
  return section;
}

Section data_features_section() {
  using C = TrainConfig;
  return {
      "data.features",
      "The contract of every record's features.",
      {nested_key(&C::data, &DataConfig::features, &FeaturesConfig::dtype, "dtype",
                  "the dtype the source holds (csv: f64), or `any`",
                  one_of({"any", "bool", "u8", "i32", "i64", "u32", "f16", "bf16", "f32", "f64"})),
       nested_key(&C::data, &DataConfig::features, &FeaturesConfig::shape, "shape",
                  "each record's shape (empty: any; fashion_mnist: [28, 28])",
                  at_most(at_least(1), 1 << 20)),
       nested_key(&C::data, &DataConfig::features, &FeaturesConfig::min, "min",
                  "every element is >= min (before normalization)", any_bound()),
       nested_key(&C::data, &DataConfig::features, &FeaturesConfig::max, "max",
                  "every element is <= max (before normalization)", any_bound()),
       nested_key(&C::data, &DataConfig::features, &FeaturesConfig::finite, "finite",
                  "every element is finite (no NaN, no infinity)")}};
}

Section data_label_section() {
  using C = TrainConfig;
  return {
      "data.label",
      "The contract of the labels.",
      {nested_key(&C::data, &DataConfig::label, &LabelConfig::num_classes, "num_classes",
                  "labels are integers in [0, num_classes) (0: fashion_mnist's 10, or the number "
                  "of label_names)",
                  at_most(at_least(0), 1 << 20)),
       nested_key(&C::data, &DataConfig::label, &LabelConfig::min_per_class, "min_per_class",
                  "each class has at least this many valid training examples", at_least(0))}};
}

Section data_augment_section() {
  using C = TrainConfig;
  return {"data.augment",
          "Per-example augmentation of training images, drawn from the seed and the example's "
          "global index (not from the worker, the batch size or the resume point).",
          {nested_key(&C::data, &DataConfig::augment, &AugmentConfig::crop_padding, "crop_padding",
                      "pad each image by this many zero pixels and crop it back at a random "
                      "offset (0: off)",
                      at_most(at_least(0), 64)),
           nested_key(&C::data, &DataConfig::augment, &AugmentConfig::horizontal_flip,
                      "horizontal_flip", "mirror each image left-right with probability 1/2")}};
}

Section model_section() {
  using C = TrainConfig;
  Key layers;
  layers.name = "layers";
  layers.type = Type::kLayers;
  layers.help = "the network, first layer first: `[[model.layers]]` tables (below)";
  layers.default_doc = "required";
  return {"model",
          "The network: a stack of layers applied in order, or a GPT-2 (`[model.gpt2]`).",
          {key(&C::model, &ModelConfig::kind, "kind",
               "`sequential` (the `[[model.layers]]` below) or `gpt2` (a GPT-2 of the sizes in "
               "`[model.gpt2]`, for `text` and `tokens` data)",
               one_of({"sequential", "gpt2"}), {"type", "architecture"}),
           key(&C::model, &ModelConfig::compute_dtype, "compute_dtype",
               "the dtype the layers compute in: `f32`, `bf16`, or `f16` (with loss scaling, "
               "train.loss_scale); params, the optimizer and the loss stay f32; "
               "docs/precision.md",
               one_of({"f32", "bf16", "f16"}), {"precision", "dtype", "compute_precision"}),
           layers}};
}

// model.gpt2.attention: written only when not plain, so that the GPT-2 runs before it keep
// their config text and identity.
Key gpt2_attention_key() {
  Key k =
      nested_key(&TrainConfig::model, &ModelConfig::gpt2, &Gpt2ModelConfig::attention, "attention",
                 "how the blocks' causal self-attention computes: `plain` (the [T, T] "
                 "logits and their softmax) or `flash` (pallas::flash_attention: the same "
                 "math without the [T, T] matrix, peak memory O(T) per head; "
                 "docs/kernels.md)",
                 one_of({"plain", "flash"}), {"attention_implementation"});
  k.written = [](const TrainConfig& config) { return config.model.gpt2.attention != "plain"; };
  return k;
}

Section model_gpt2_section() {
  using C = TrainConfig;
  return {"model.gpt2",
          "The sizes of a GPT-2 (model.kind = `gpt2`; docs/transformer.md). The defaults are a "
          "small model for bytes; GPT-2 124M is layers 12, heads 12, channels 768, vocab_size "
          "50257.",
          {nested_key(&C::model, &ModelConfig::gpt2, &Gpt2ModelConfig::layers, "layers",
                      "transformer blocks", at_most(at_least(1), 1024), {"n_layer", "num_layers"}),
           nested_key(&C::model, &ModelConfig::gpt2, &Gpt2ModelConfig::heads, "heads",
                      "attention heads per block (a divisor of channels)",
                      at_most(at_least(1), 1024), {"n_head", "num_heads"}),
           nested_key(&C::model, &ModelConfig::gpt2, &Gpt2ModelConfig::channels, "channels",
                      "the residual stream's width C", at_most(at_least(1), kMaxFeatures),
                      {"n_embd", "d_model", "hidden_size"}),
           nested_key(&C::model, &ModelConfig::gpt2, &Gpt2ModelConfig::vocab_size, "vocab_size",
                      "tokens the model predicts: at least the data's (256 for text)",
                      at_most(at_least(1), 1 << 20)),
           nested_key(&C::model, &ModelConfig::gpt2, &Gpt2ModelConfig::padded_vocab_size,
                      "padded_vocab_size",
                      "the embedding's rows, >= vocab_size (0: vocab_size rounded up to a "
                      "multiple of 128)",
                      at_most(at_least(0), 1 << 20)),
           nested_key(&C::model, &ModelConfig::gpt2, &Gpt2ModelConfig::max_context, "max_context",
                      "the longest input (the position embedding's rows), >= data.context",
                      at_most(at_least(1), 1 << 20), {"n_positions"}),
           nested_key(&C::model, &ModelConfig::gpt2, &Gpt2ModelConfig::remat, "remat",
                      "what the backward pass recomputes rather than keeps: `none`, `blocks` (each "
                      "block from its input: the least memory), `blocks_save_dots` (each block but "
                      "its matmuls)",
                      one_of({"none", "blocks", "blocks_save_dots"}),
                      {"checkpoint", "gradient_checkpointing"}),
           gpt2_attention_key()}};
}

Section optim_section() {
  using C = TrainConfig;
  return {
      "optim",
      "The optimizer and its learning-rate schedule.",
      {key(&C::optim, &OptimConfig::name, "name", "the update rule",
           one_of({"sgd", "momentum", "nesterov", "adam", "adamw", "rmsprop"}),
           {"optimizer", "type"}),
       key(&C::optim, &OptimConfig::lr, "lr",
           "learning rate: the constant value, or the schedule's initial/peak value",
           positive_f32(), {"learning_rate", "lr0", "eta"}),
       key(&C::optim, &OptimConfig::schedule, "schedule",
           "how the learning rate changes with the step (decays run over all training steps)",
           one_of({"constant", "linear", "cosine", "warmup_cosine", "exponential", "piecewise"}),
           {"lr_schedule", "scheduler"}),
       key(&C::optim, &OptimConfig::warmup_steps, "warmup_steps",
           "warmup_cosine: steps of linear warmup from 0 to lr", at_most(at_least(0), kMaxSteps),
           {"warmup"}),
       key(&C::optim, &OptimConfig::end_lr, "end_lr",
           "linear, cosine, warmup_cosine: the learning rate at the last step", non_negative_f32(),
           {"final_lr", "min_lr", "eta_min"}),
       key(&C::optim, &OptimConfig::decay_rate, "decay_rate",
           "exponential: lr * decay_rate^(step / transition_steps); piecewise: the factor "
           "applied at each boundary",
           positive_f32(), {"gamma"}),
       key(&C::optim, &OptimConfig::transition_steps, "transition_steps",
           "exponential: steps per factor of decay_rate", at_most(at_least(1), kMaxSteps)),
       key(&C::optim, &OptimConfig::boundaries, "boundaries",
           "piecewise: the steps (increasing) from which the learning rate is lr * "
           "decay_rate^k, k the number of boundaries reached (PyTorch's MultiStepLR, in steps)",
           at_most(at_least(1), kMaxSteps), {"milestones"}),
       key(&C::optim, &OptimConfig::b1, "b1", "adam, adamw: first-moment decay", fraction(),
           {"beta1"}),
       key(&C::optim, &OptimConfig::b2, "b2", "adam, adamw: second-moment decay", fraction(),
           {"beta2"}),
       key(&C::optim, &OptimConfig::eps, "eps", "adam, adamw, rmsprop: added to the denominator",
           non_negative_f32(), {"epsilon"}),
       key(&C::optim, &OptimConfig::momentum, "momentum",
           "momentum, nesterov: the velocity decay; rmsprop: the squared-gradient decay",
           fraction(), {"beta", "alpha", "decay"}),
       key(&C::optim, &OptimConfig::weight_decay, "weight_decay",
           "adamw: decoupled weight decay (PyTorch's default 0.01)", non_negative_f32(), {"wd"}),
       key(&C::optim, &OptimConfig::decay_mask, "decay_mask",
           "adamw: decay `all` parameters, or only `matrices` (rank >= 2: not biases or "
           "norm scales)",
           one_of({"all", "matrices"}), {"mask"}),
       key(&C::optim, &OptimConfig::clip_global_norm, "clip_global_norm",
           "rescale gradients whose global L2 norm exceeds this (0: no clipping)",
           non_negative_f32(), {"max_grad_norm", "clip_norm", "grad_clip"})}};
}

// The loss-scale keys are written when the run scales its loss or the key is not at its
// default: a run without loss scaling keeps the config text (and identity) it had before
// the keys existed.
template <class T>
Key loss_scale_key(T TrainLoopConfig::*member, std::string_view name, std::string_view help,
                   Constraint constraint = {}, std::vector<std::string_view> aliases = {}) {
  Key k = key(&TrainConfig::train, member, name, help, std::move(constraint), std::move(aliases));
  k.written = [member](const TrainConfig& config) {
    return resolved_loss_scale(config) != "none" ||
           !(config.train.*member == TrainLoopConfig{}.*member);
  };
  return k;
}

Constraint between(double min, double max, bool min_exclusive, bool max_exclusive) {
  Constraint constraint = at_most(at_least(min), max);
  constraint.min_exclusive = min_exclusive;
  constraint.max_exclusive = max_exclusive;
  return constraint;
}

// train.memory_budget: written only when set, so that the runs before it keep their config
// text and identity.
Key memory_budget_key() {
  Key k = key(&TrainConfig::train, &TrainLoopConfig::memory_budget, "memory_budget",
              "a size such as \"2GiB\" or \"1.5 GB\" (empty: none): before the first step, kiln "
              "picks the fewest micro-batches per update (train.accumulate, train.batch_size), "
              "then the least recomputation (model.gpt2.remat, or a sequential model's blocks "
              "where its layers set no remat), whose train step the "
              "memory planner expects to fit, prints the plans it tried and trains with the "
              "first that fits (docs/memory.md); one device",
              optional_path(), {"memory_limit", "max_memory"});
  k.written = [](const TrainConfig& config) { return !config.train.memory_budget.empty(); };
  return k;
}

// [train]: the loop's shape.
std::vector<Key> train_loop_keys() {
  using C = TrainConfig;
  return {key(&C::train, &TrainLoopConfig::epochs, "epochs", "passes over the training set",
              at_most(at_least(1), kMaxEpochs), {"num_epochs", "n_epochs"}),
          key(&C::train, &TrainLoopConfig::batch_size, "batch_size", "examples per step",
              at_most(at_least(1), kMaxBatch), {"batch", "bs"}),
          key(&C::train, &TrainLoopConfig::accumulate, "accumulate",
              "micro-batches of batch_size whose gradients each update adds up (gradient "
              "accumulation; the update of one batch of accumulate x batch_size in "
              "accumulate x mesh.chunks chunks, with the memory of a micro-batch)",
              at_most(at_least(1), kMaxBatch),
              {"gradient_accumulation_steps", "accumulate_grad_batches", "accumulation_steps"}),
          memory_budget_key(),
          key(&C::train, &TrainLoopConfig::eval_batch_size, "eval_batch_size",
              "examples per evaluation batch (does not change the results)",
              at_most(at_least(1), kMaxBatch), {"test_batch_size"}),
          key(&C::train, &TrainLoopConfig::log_every, "log_every",
              "without a terminal, print a progress line every N steps", at_least(1),
              {"log_interval", "print_every"})};
}

// [train]: non-finite losses and gradients, and loss scaling.
std::vector<Key> train_nonfinite_keys() {
  using C = TrainConfig;
  return {key(&C::train, &TrainLoopConfig::on_nonfinite, "on_nonfinite",
              "a NaN or infinite loss or gradient: `stop` the run, or `skip` the step",
              one_of({"stop", "skip"}), {"on_nan"}),
          key(&C::train, &TrainLoopConfig::max_skipped_steps, "max_skipped_steps",
              "with on_nonfinite = `skip`: the run fails (status 2) once more steps than this "
              "were skipped",
              at_most(at_least(1), kMaxSteps), {"max_skips"}),
          loss_scale_key(&TrainLoopConfig::loss_scale, "loss_scale",
                         "loss scaling (docs/precision.md): `auto` (`dynamic` with "
                         "model.compute_dtype = `f16`, `none` otherwise), `dynamic` (a step "
                         "whose gradient overflows is skipped, not counted against "
                         "max_skipped_steps, and the scale backs off; it grows after "
                         "loss_scale_growth_interval good steps), `fixed` (always "
                         "loss_scale_initial), `none`",
                         one_of({"auto", "dynamic", "fixed", "none"}),
                         {"grad_scaler", "scaler", "amp"}),
          loss_scale_key(&TrainLoopConfig::loss_scale_initial, "loss_scale_initial",
                         "the first scale of `dynamic`, the scale of `fixed`",
                         at_most(at_least(1), kMaxF32), {"init_scale", "initial_scale"}),
          loss_scale_key(&TrainLoopConfig::loss_scale_growth_interval, "loss_scale_growth_interval",
                         "`dynamic`: the scale grows after this many good steps in a row",
                         at_most(at_least(1), kMaxSteps), {"growth_interval", "period"}),
          loss_scale_key(&TrainLoopConfig::loss_scale_backoff, "loss_scale_backoff",
                         "`dynamic`: the factor in (0, 1) a step whose gradient is not finite "
                         "multiplies the scale by (never below 1)",
                         between(0, 1, true, true), {"backoff_factor"}),
          loss_scale_key(&TrainLoopConfig::loss_scale_growth, "loss_scale_growth",
                         "`dynamic`: the factor, > 1, the scale grows by",
                         between(1, kMaxF32, true, false), {"growth_factor", "factor"}),
          loss_scale_key(&TrainLoopConfig::skipped_steps_advance_schedule,
                         "skipped_steps_advance_schedule",
                         "a skipped step (a loss-scale overflow, or on_nonfinite = `skip`) "
                         "still advances the optimizer's step count, and so the learning-rate "
                         "schedule (false: it changes nothing)",
                         {}, {"skip_advances_schedule"})};
}

// [train]: how long it runs and how its batches are cut.
std::vector<Key> train_batch_keys() {
  using C = TrainConfig;
  return {key(&C::train, &TrainLoopConfig::max_steps, "max_steps",
              "stop after N steps in total (0: run all epochs)", at_most(at_least(0), kMaxSteps),
              {"steps", "num_steps"}),
          key(&C::train, &TrainLoopConfig::flush_denormals, "flush_denormals",
              "run the train and eval steps with subnormal floats flushed to zero (faster where "
              "gradients or optimizer moments underflow; false: IEEE gradual underflow)",
              {}, {"ftz", "denormals_are_zero"}),
          key(&C::train, &TrainLoopConfig::drop_remainder, "drop_remainder",
              "leave out each epoch's last, smaller batch (every step has the same shape: one "
              "compilation)",
              {}, {"drop_last"}),
          key(&C::train, &TrainLoopConfig::pad_remainder, "pad_remainder",
              "fill each epoch's last, smaller batch up to batch_size with rows that a mask "
              "leaves out of the loss, the gradient and the metrics (one compilation, and no "
              "example left out)",
              {}, {"pad_last"})};
}

// [train]: savepoints.
std::vector<Key> train_savepoint_keys() {
  using C = TrainConfig;
  return {key(&C::train, &TrainLoopConfig::savepoint_every, "savepoint_every",
              "write a savepoint (the whole train state, for `kiln resume`) every N steps (0: "
              "not by steps); one is always written at the end and on SIGINT/SIGTERM",
              at_most(at_least(0), kMaxSteps), {"save_every", "save_steps"}),
          key(&C::train, &TrainLoopConfig::savepoint_every_seconds, "savepoint_every_seconds",
              "also write a savepoint once this many seconds passed since the last (0: not by "
              "time)",
              at_most(at_least(0), kMaxF32), {"save_every_seconds"}),
          key(&C::train, &TrainLoopConfig::savepoint_keep_last, "savepoint_keep_last",
              "keep the newest N savepoints", at_most(at_least(1), kMaxSteps),
              {"keep_last", "save_total_limit", "max_to_keep"}),
          key(&C::train, &TrainLoopConfig::savepoint_keep_every, "savepoint_keep_every",
              "also keep every savepoint whose step is a multiple of N (0: none)",
              at_most(at_least(0), kMaxSteps), {"keep_every"}),
          key(&C::train, &TrainLoopConfig::savepoint_async, "savepoint_async",
              "write savepoints on a background thread while training goes on (false: the step "
              "waits for the write)",
              {}, {"async_save"}),
          key(&C::train, &TrainLoopConfig::on_savepoint_error, "on_savepoint_error",
              "a savepoint that cannot be written (full disk): `stop` the run, or `continue` "
              "without it (earlier savepoints are kept either way)",
              one_of({"stop", "continue"}))};
}

Section train_section() {
  // In this order: it is the order of config.toml, of the docs and of the run identity.
  std::vector<Key> keys;
  for (auto part :
       {train_loop_keys, train_nonfinite_keys, train_batch_keys, train_savepoint_keys}) {
    for (Key& key : part()) keys.push_back(std::move(key));
  }
  return {"train", "The training loop.", std::move(keys)};
}

Section mesh_section() {
  using C = TrainConfig;
  return {"mesh",
          "Data- and tensor-parallel training over logical CPU devices (KILN_CPU_DEVICES); "
          "docs/training.md.",
          {key(&C::mesh, &MeshConfig::data, "data",
               "devices on the mesh axis `data`, each taking an equal share of every batch (0: "
               "one device, no mesh; 1 runs the data-parallel step on one device)",
               at_most(at_least(0), 1024), {"data_parallel", "devices", "dp"}, data_parallel),
           key(&C::mesh, &MeshConfig::chunks, "chunks",
               "equal parts of each batch whose gradients are added in a fixed tree: a multiple of "
               "`data`, and the same value gives the same bits on 1, 2, 4... devices",
               at_most(at_least(1), kMaxBatch), {"num_chunks", "microbatches"}),
           key(&C::mesh, &MeshConfig::shard_params, "shard_params",
               "split params and optimizer state over the devices along their first dimension "
               "(FSDP, ZeRO-3: each device holds 1/data of them); the same bits as replicated",
               {}, {"fsdp", "zero3", "shard_optimizer_state"}, sharded_or_not),
           key(&C::mesh, &MeshConfig::model, "model",
               "devices on the mesh axis `model`, over which dense layers with `parallel = "
               "\"column\"` / `\"row\"` split their kernels (Megatron-style tensor parallelism); "
               "the mesh then has data x model devices",
               at_most(at_least(1), 1024), {"tensor_parallel", "tp"})}};
}

Section tracking_section() {
  using C = TrainConfig;
  return {"tracking",
          "Where the run is recorded besides its directory (docs/tracking.md). Not part of the run "
          "identity.",
          {key(&C::tracking, &TrackingConfig::catalog, "catalog",
               "record the run in the catalog `<runs_dir>/kiln.db` (`kiln runs`)"),
           key(&C::tracking, &TrackingConfig::tensorboard, "tensorboard",
               "write TensorBoard scalar event files in the run directory"),
           key(&C::tracking, &TrackingConfig::mlflow_uri, "mlflow_uri",
               "mirror the run to this MLflow tracking server (`http://host:port`; empty: none)",
               optional_path()),
           key(&C::tracking, &TrackingConfig::mlflow_experiment, "mlflow_experiment",
               "the MLflow experiment (empty: `experiment.name`)", optional_path()),
           key(&C::tracking, &TrackingConfig::wait_seconds, "wait_seconds",
               "at the end of the run, wait at most this long for records not yet sent",
               at_most(at_least(0), 3600))},
          false};
}

Section telemetry_section() {
  using C = TrainConfig;
  return {"telemetry",
          "Per-layer statistics of a sequential model (per stage of a GPT-2) every N steps, in "
          "metrics.jsonl "
          "(docs/training.md, *Telemetry*). Not part of the run identity: it changes no number "
          "the run computes.",
          {key(&C::telemetry, &TelemetryConfig::every, "every",
               "steps between two (0: none): each layer's activation mean and std, dead ReLU "
               "units, saturated sigmoid/tanh outputs, gradient norm and update-to-parameter "
               "ratio, on that step's batch and state",
               at_most(at_least(0), kMaxSteps), {"every_steps", "interval", "log_every"}),
           key(&C::telemetry, &TelemetryConfig::dead_warning, "dead_warning",
               "warn when more than this fraction of a ReLU layer's units are dead (zero for "
               "every example of the batch)",
               between(0, 1, false, false), {"dead_threshold"}),
           key(&C::telemetry, &TelemetryConfig::saturation_warning, "saturation_warning",
               "warn when more than this fraction of a sigmoid or tanh layer's outputs are "
               "saturated (within 0.01 of an asymptote)",
               between(0, 1, false, false), {"saturation_threshold"})},
          false};
}

// privacy.accountant: written only when not rdp, so that the private runs before it keep
// their config text and identity.
Key privacy_accountant_key() {
  Key k = key(&TrainConfig::privacy, &PrivacyConfig::accountant, "accountant",
              "what epsilon (per epoch, in run.json) and max_epsilon are counted by: `rdp` "
              "(Rényi DP, Mironov et al.) or `pld` (the privacy loss distribution, as "
              "dp-accounting's PLDAccountant computes it: the same guarantee, a smaller epsilon)",
              one_of({"rdp", "pld"}), {"accounting"});
  k.written = [](const TrainConfig& config) { return config.privacy.accountant != "rdp"; };
  return k;
}

Section privacy_section() {
  using C = TrainConfig;
  Section section{
      "privacy",
      "Differentially private training (DP-SGD, docs/privacy.md): every step samples each "
      "training example with probability q = train.batch_size / N (Poisson sampling), clips "
      "each sampled example's gradient to L2 norm clip_norm, adds Gaussian noise of standard "
      "deviation noise_multiplier x clip_norm to their sum and divides by train.batch_size. "
      "One device or a data-parallel mesh (mesh.data); sequential models without batch norm.",
      {key(&C::privacy, &PrivacyConfig::enabled, "enabled",
           "train with DP-SGD (false: the ordinary step; the other keys are then unused)", {},
           {"dp", "private", "dp_sgd"}),
       key(&C::privacy, &PrivacyConfig::noise_multiplier, "noise_multiplier",
           "sigma: the noise's standard deviation over clip_norm", between(0, 1e6, true, false),
           {"sigma", "noise", "noise_scale"}),
       key(&C::privacy, &PrivacyConfig::clip_norm, "clip_norm",
           "C: the L2 norm each example's gradient (all parameters together) is clipped to",
           between(0, 1e30, true, false), {"max_grad_norm", "l2_norm_clip", "clip"}),
       key(&C::privacy, &PrivacyConfig::delta, "delta",
           "the delta of the (epsilon, delta) guarantee that epsilon is reported at; below "
           "1 / N (a warning says so otherwise)",
           between(0, 1, true, true), {"target_delta"}),
       key(&C::privacy, &PrivacyConfig::max_epsilon, "max_epsilon",
           "the budget: the run stops before the step that would spend more epsilon at delta "
           "(0: no budget)",
           between(0, 1e6, false, false), {"target_epsilon", "epsilon", "budget"}),
       key(&C::privacy, &PrivacyConfig::examples_per_chunk, "examples_per_chunk",
           "per-example gradients computed (and held in memory) this many examples at a time; it "
           "fixes the order in which the clipped gradients are added, so the bits depend on it",
           at_most(at_least(1), kMaxBatch), {"microbatch", "physical_batch_size"}),
       privacy_accountant_key()}};
  section.written = [](const TrainConfig& config) { return !(config.privacy == PrivacyConfig{}); };
  return section;
}

std::vector<Section> make_sections() {
  return {experiment_section(),   data_section(),  data_features_section(), data_label_section(),
          data_augment_section(), model_section(), model_gpt2_section(),    optim_section(),
          train_section(),        mesh_section(),  tracking_section(),      telemetry_section(),
          privacy_section()};
}

}  // namespace

bool LayerTypeRow::takes(std::string_view field) const {
  // Policies, not a layer's own settings: every type takes them.
  if (field == "compute_dtype" || field == "remat" || field == "remat_span") return true;
  auto has = [&](const std::vector<std::string_view>& names) {
    return std::find(names.begin(), names.end(), field) != names.end();
  };
  return has(required) || has(optional);
}

std::vector<std::string_view> LayerTypeRow::fields() const {
  std::vector<std::string_view> all = required;
  all.insert(all.end(), optional.begin(), optional.end());
  return all;
}

const std::vector<Section>& sections() {
  static const auto* table = new std::vector<Section>(make_sections());
  return *table;
}

const std::vector<LayerField>& layer_fields() {
  static const auto* table = new std::vector<LayerField>{
      layer_field(&LayerConfig::features, "features", "output units (dense) or channels (conv2d)",
                  at_most(at_least(1), kMaxFeatures), "required"),
      layer_field(&LayerConfig::kernel_size, "kernel_size", "[height, width] of the kernel",
                  pair_of_positive(), "required"),
      layer_field(&LayerConfig::window, "window", "[height, width] of the pooling window",
                  pair_of_positive(), "required"),
      layer_field(&LayerConfig::strides, "strides", "[height, width] step between windows",
                  pair_of_positive(), "`[1, 1]` (conv2d), the window (pools)"),
      layer_field(&LayerConfig::padding, "padding",
                  "`valid`: windows inside the input only; `same`: zero-pad so that the output "
                  "is ceil(input / stride)",
                  one_of({"valid", "same"})),
      layer_field(&LayerConfig::rate, "rate", "probability of zeroing each element in training",
                  fraction(), "required"),
      layer_field(&LayerConfig::parallel, "parallel",
                  "tensor parallel over mesh axis `model`: `column` splits the kernel's columns "
                  "(and the bias), `row` its rows; a column layer is followed, after "
                  "activations only, by a row layer",
                  one_of({"none", "column", "row"})),
      layer_field(&LayerConfig::compute_dtype, "compute_dtype",
                  "any type: the dtype this layer computes in, overriding model.compute_dtype "
                  "for it (`f32` keeps a norm in full precision inside a `bf16` model); its "
                  "parameters stay f32",
                  one_of({"", "f32", "bf16", "f16"}), "model.compute_dtype"),
      layer_field(&LayerConfig::remat, "remat",
                  "any type: in training, recompute this layer (and the next `remat_span` - 1) "
                  "in the backward pass instead of keeping its intermediate values: "
                  "`save_nothing` keeps only the block's input, `save_dot_outputs` also its "
                  "matmul (dot_general) results (docs/memory.md)",
                  one_of({"none", "save_nothing", "save_dot_outputs"})),
      layer_field(&LayerConfig::remat_span, "remat_span",
                  "any type, with `remat`: how many layers, from this one, form the "
                  "rematerialized block (ignored while remat is `none`)",
                  at_most(at_least(1), kMaxLayers), "`1`"),
  };
  return *table;
}

const std::vector<LayerTypeRow>& layer_types() {
  // The activations are those nn::activation_by_name accepts (include/kiln/nn/activations.h).
  static const auto* table = new std::vector<LayerTypeRow>{
      {"dense", "x @ kernel + bias over the last axis", {"features"}, {"parallel"}, build_dense},
      {"conv2d",
       "2-D convolution over NHWC input",
       {"features", "kernel_size"},
       {"strides", "padding"},
       build_conv2d},
      {"max_pool", "maximum over each window", {"window"}, {"strides", "padding"}, build_max_pool},
      {"avg_pool", "mean over each window", {"window"}, {"strides", "padding"}, build_avg_pool},
      {"flatten", "keeps the batch axis, flattens the rest", {}, {}, build_flatten},
      {"dropout",
       "zeroes elements in training, scales the rest by 1 / (1 - rate)",
       {"rate"},
       {},
       build_dropout},
      {"batch_norm",
       "normalises over all but the last axis (running statistics in evaluation)",
       {},
       {},
       build_batch_norm},
      {"layer_norm", "normalises over the last axis", {}, {}, build_layer_norm},
      {"rms_norm", "scales by the root mean square over the last axis", {}, {}, build_rms_norm},
      {"relu", "max(x, 0)", {}, {}, build_activation, true},
      {"leaky_relu", "x if x > 0, else 0.01 x", {}, {}, build_activation, true},
      {"elu", "x if x > 0, else exp(x) - 1", {}, {}, build_activation, true},
      {"gelu", "x * Phi(x) (exact, with erf)", {}, {}, build_activation, true},
      {"gelu_tanh", "gelu's tanh approximation", {}, {}, build_activation, true},
      {"silu", "x * sigmoid(x)", {}, {}, build_activation, true},
      {"sigmoid", "1 / (1 + exp(-x))", {}, {}, build_activation, true},
      {"tanh", "tanh(x)", {}, {}, build_activation, true},
      {"softplus", "log(1 + exp(x))", {}, {}, build_activation, true},
      {"identity", "x", {}, {}, build_activation, true},
  };
  return *table;
}

const std::vector<std::pair<std::string_view, std::string_view>>& section_aliases() {
  static const auto* table = new std::vector<std::pair<std::string_view, std::string_view>>{
      {"optimizer", "optim"}, {"optimiser", "optim"}, {"training", "train"},
      {"dataset", "data"},    {"network", "model"},   {"run", "experiment"},
  };
  return *table;
}

const Section* find_section(std::string_view name) {
  for (const Section& section : sections()) {
    if (section.name == name) return &section;
  }
  return nullptr;
}

const Key* find_key(const Section& section, std::string_view name) {
  for (const Key& key : section.keys) {
    if (key.name == name) return &key;
  }
  return nullptr;
}

const LayerField* find_layer_field(std::string_view name) {
  for (const LayerField& field : layer_fields()) {
    if (field.name == name) return &field;
  }
  return nullptr;
}

const LayerTypeRow* find_layer_type(std::string_view name) {
  for (const LayerTypeRow& type : layer_types()) {
    if (type.name == name) return &type;
  }
  return find_registered_layer_type(name);
}

std::vector<std::string_view> layer_type_names() {
  std::vector<std::string_view> names;
  for (const LayerTypeRow& type : layer_types()) names.push_back(type.name);
  for (std::string_view name : registered_layer_type_names()) names.push_back(name);
  return names;
}

}  // namespace kiln::train::schema
