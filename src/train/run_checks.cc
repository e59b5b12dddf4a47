// Checks before a run starts (run_checks.h).
#include "train/run_checks.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "dist/processes.h"
#include "kiln/device.h"
#include "kiln/error.h"
#include "train/builders.h"

namespace kiln::train {
namespace {

constexpr int64_t kMaxOptimizerSteps = std::numeric_limits<int32_t>::max();
constexpr double kSmallestRate = 1e-30;  // the f32 range of the schedule keys
constexpr double kLargestRate = 1e30;

[[noreturn]] void refuse(std::string message, std::string hint = {}) {
  fail(kUnknownSite, std::move(message), std::move(hint));
}

// The product of `dims`, or -1 if it overflows int64.
int64_t checked_product(const Shape& shape) {
  int64_t product = 1;
  for (int64_t axis = 0; axis < shape.rank(); ++axis) {
    if (__builtin_mul_overflow(product, shape[axis], &product)) return -1;
  }
  return product;
}

std::string layer_label(const LayerConfig& layer, size_t index) {
  return fmt::format("model.layers[{}] ({}, line {})", index, layer.type, layer.line);
}

AbstractValue with_batch(AbstractValue value, int64_t batch) {
  value.shape[0] = batch;
  return value;
}

// The parameter a dense or conv2d layer creates with the most elements (its kernel).
int64_t kernel_elements(const LayerConfig& layer, const AbstractValue& input) {
  if (input.shape.rank() == 0) return 0;
  int64_t in = input.shape[input.shape.rank() - 1];
  int64_t elements = in;
  bool overflow = __builtin_mul_overflow(elements, layer.features, &elements);
  if (layer.type == "conv2d") {
    for (int64_t k : layer.kernel_size) overflow |= __builtin_mul_overflow(elements, k, &elements);
  } else if (layer.type != "dense") {
    return 0;
  }
  return overflow ? -1 : elements;
}

void check_size(const std::string& label, std::string_view what, int64_t elements,
                std::string_view hint) {
  if (elements >= 0 && elements <= kMaxTensorElements) return;
  refuse(fmt::format("{}: {} would hold {} elements, more than the limit of {} (8 GiB of f32) "
                     "for one tensor",
                     label, what,
                     elements < 0 ? std::string("more than 2^63") : fmt::format("{}", elements),
                     kMaxTensorElements),
         std::string(hint));
}

// The batch-norm layers' need for two values per channel in the smallest training batch.
void check_batch_norm(const std::string& label, const AbstractValue& input, int64_t smallest,
                      const TrainConfig& config, int64_t train_examples) {
  int64_t values = 1;
  for (int64_t axis = 0; axis + 1 < input.shape.rank(); ++axis) values *= input.shape[axis];
  if (values >= 2) return;
  refuse(fmt::format("{}: batch statistics need at least 2 values per channel, but the last "
                     "training batch of each epoch has {} example(s) ({} training examples, "
                     "train.batch_size = {}), which gives this layer input {}",
                     label, smallest, train_examples, config.train.batch_size, input.to_string()),
         "change train.batch_size or data.train_limit so that the last batch holds 2 or more "
         "examples");
}

}  // namespace

int64_t planned_steps(const TrainLoopConfig& train, int64_t train_examples,
                      int64_t batches_per_epoch) {
  if (train_examples <= 0 || batches_per_epoch <= 0) {
    refuse("the training split holds no examples: the run could not take a step",
           "check data.dir and data.train_limit");
  }
  int64_t steps = 0;
  bool overflow = __builtin_mul_overflow(train.epochs, batches_per_epoch, &steps);
  if (!overflow && train.max_steps > 0) steps = std::min(steps, train.max_steps);
  if (overflow || steps > kMaxOptimizerSteps) {
    refuse(fmt::format("train.epochs = {} with {} batches per epoch ({} examples, "
                       "train.batch_size = {}) is {} steps, more than the {} the optimizer's "
                       "step count (i32) can hold",
                       train.epochs, batches_per_epoch, train_examples, train.batch_size,
                       overflow ? std::string("more than 2^63") : fmt::format("{}", steps),
                       kMaxOptimizerSteps),
           "lower train.epochs, or set train.max_steps");
  }
  return steps;
}

void check_layers(const TrainConfig& config, const AbstractValue& image, int64_t train_examples,
                  int64_t total_steps) {
  const TrainLoopConfig& train = config.train;
  int64_t largest = std::max(train.batch_size, train.eval_batch_size);
  int64_t remainder = train_examples % train.batch_size;
  int64_t batches_per_epoch = train_examples / train.batch_size + (remainder != 0 ? 1 : 0);
  // The smallest training batch the run will see: an epoch's last, if a run reaches it.
  int64_t smallest = std::min(train.batch_size, train_examples);
  if (remainder != 0 && total_steps >= batches_per_epoch && !train.pad_remainder)
    smallest = remainder;
  AbstractValue input = image;
  for (size_t i = 0; i < config.model.layers.size(); ++i) {
    const LayerConfig& layer = config.model.layers[i];
    std::string label = layer_label(layer, i);
    nn::Module module = build_layer(layer);
    if (layer.type == "batch_norm" && train.pad_remainder) {
      refuse(fmt::format("{}: with train.pad_remainder the padded rows would enter this layer's "
                         "batch statistics",
                         label),
             "set train.drop_remainder = true instead, or neither");
    }
    if (layer.type == "batch_norm") {
      check_batch_norm(label, with_batch(input, smallest), smallest, config, train_examples);
    }
    check_size(label, "its kernel", kernel_elements(layer, input),
               "use fewer features or a smaller kernel");
    AbstractValue output = module.output_type(input);
    check_size(label,
               fmt::format("its output for a batch of {} ({})", largest,
                           with_batch(output, largest).to_string()),
               checked_product(with_batch(output, largest).shape),
               "use fewer features, a smaller train.batch_size / train.eval_batch_size, or "
               "pool earlier");
    input = output;
  }
}

void check_schedule_range(const OptimConfig& c, int64_t total_steps) {
  optim::Schedule schedule = build_schedule(c, total_steps);
  std::set<int64_t> steps = {0, 1, total_steps - 1, total_steps};
  for (int64_t s : {c.warmup_steps - 1, c.warmup_steps, c.warmup_steps + 1}) steps.insert(s);
  for (int64_t b : c.boundaries) steps.insert({b - 1, b});
  bool decays_to_zero = c.end_lr == 0 && (c.schedule == "linear" || c.schedule == "cosine" ||
                                          c.schedule == "warmup_cosine");
  for (int64_t step : steps) {
    if (step < 0 || step > total_steps) continue;
    double rate = optim::schedule_value(schedule, step);
    bool zero_meant = rate == 0 && ((decays_to_zero && step == total_steps) ||
                                    (c.schedule == "warmup_cosine" && step == 0));
    // Compared in f32, the type the step computes in (the f32 nearest 1e30 is above it).
    auto f32 = [](double x) { return static_cast<float>(x); };
    if (std::isfinite(f32(rate)) && f32(rate) <= f32(kLargestRate) &&
        (f32(rate) >= f32(kSmallestRate) || zero_meant)) {
      continue;
    }
    std::string keys = c.schedule == "exponential" ? fmt::format(
                                                         "optim.lr = {}, optim.decay_rate = {}, "
                                                         "optim.transition_steps = {}",
                                                         c.lr, c.decay_rate, c.transition_steps)
                       : c.schedule == "piecewise"
                           ? fmt::format(
                                 "optim.lr = {}, optim.decay_rate = {}, "
                                 "optim.boundaries = [{}]",
                                 c.lr, c.decay_rate, fmt::join(c.boundaries, ", "))
                           : fmt::format("optim.lr = {}, optim.end_lr = {}", c.lr, c.end_lr);
    refuse(fmt::format("optim.schedule = \"{}\" ({}) gives a learning rate of {} at step {} of {}: "
                       "outside [{}, {}], where f32 arithmetic would train with {}",
                       c.schedule, keys, rate, step, total_steps, kSmallestRate, kLargestRate,
                       rate < kSmallestRate ? "a rate of 0 or a subnormal" : "an infinity"),
           "change those keys, or train fewer steps (train.epochs, train.max_steps)");
  }
}

namespace {

// An MPI job of `processes` ranks: one global mesh over all of them.
void check_mesh_spans_processes(const TrainConfig& c, int64_t processes) {
  if (c.mesh.data == 0 || c.mesh.data % processes != 0) {
    fail(kUnknownSite,
         fmt::format("{}: this job has {} processes (mpirun -np {}), so mesh.data must be a "
                     "multiple of {}; it is {}",
                     c.source, processes, processes, processes, c.mesh.data),
         fmt::format("set mesh.data = {} (one device per process) or another multiple; each "
                     "process then runs mesh.data / {} logical devices",
                     processes, processes));
  }
  if (c.mesh.shard_params) {
    fail(kUnknownSite,
         fmt::format("{}: mesh.shard_params across processes is not built yet: FSDP splits "
                     "params over the devices of one process",
                     c.source),
         "run it in one process (KILN_CPU_DEVICES = mesh.data), or set mesh.shard_params = "
         "false for replicated data parallelism over the processes");
  }
}

// Each epoch's last, smaller batch splits into the step's `parts` (`what`: "mesh.chunks =
// 4 equal chunks"), unless it is dropped or padded to a whole batch.
void check_last_batch_splits(const TrainConfig& c, int64_t train_examples, int64_t parts,
                             const std::string& what) {
  int64_t last = train_examples % c.train.batch_size;
  if (c.train.drop_remainder || c.train.pad_remainder || last % parts == 0) return;
  fail(kUnknownSite,
       fmt::format("{}: each epoch's last batch has {} examples, which do not split into {}",
                   c.source, last, what),
       "set train.pad_remainder = true (every example trains) or train.drop_remainder = true");
}

}  // namespace

void check_mesh_fits(const TrainConfig& c, int64_t train_examples) {
  const int64_t processes = dist::size();
  if (processes > 1) check_mesh_spans_processes(c, processes);
  if (c.mesh.data == 0) {
    // Gradient accumulation on one device (update_config): its batches split into
    // train.accumulate micro-batches.
    check_last_batch_splits(
        c, train_examples, c.train.accumulate,
        fmt::format("train.accumulate = {} equal micro-batches", c.train.accumulate));
    return;
  }
  if (dist::active() && c.mesh.model > 1) {
    fail(kUnknownSite,
         fmt::format("{}: mesh.model = {} in an MPI job is not built yet: tensor parallelism "
                     "splits layers over the devices of one process",
                     c.source, c.mesh.model),
         "run it in one process (KILN_CPU_DEVICES = mesh.data x mesh.model), or set mesh.model "
         "= 1 and the layers' parallel = \"none\"");
  }
  auto available = static_cast<int64_t>(devices().size());
  // The mesh's devices in this process: its share of `data`, times `model`.
  const int64_t local = c.mesh.data / processes * c.mesh.model;
  if (local > available) {
    std::string tensor =
        c.mesh.model > 1 ? fmt::format(" x mesh.model = {}", c.mesh.model) : std::string();
    fail(kUnknownSite,
         processes > 1
             ? fmt::format("{}: mesh.data = {} over {} processes needs {} devices in each; this "
                           "process has {}",
                           c.source, c.mesh.data, processes, local, available)
             : fmt::format("{}: mesh.data = {}{} needs {} devices; this process has {}", c.source,
                           c.mesh.data, tensor, local, available),
         fmt::format("start it with KILN_CPU_DEVICES={} (logical CPU devices), or lower mesh.data",
                     local));
  }
  check_last_batch_splits(c, train_examples, c.mesh.chunks,
                          fmt::format("mesh.chunks = {} equal chunks", c.mesh.chunks));
}

void check_model_output(const ModelConfig& config, const nn::Module& model,
                        const AbstractValue& input, const data::Dataset& dataset) {
  if (dataset.input_dtype == DType::i32 && config.kind != "gpt2") {
    fail(kUnknownSite,
         fmt::format("model: the data gives token ids ({} for input), which [[model.layers]] "
                     "cannot read",
                     input.to_string()),
         "set model.kind = \"gpt2\" (docs/transformer.md)");
  }
  AbstractValue output = model.output_type(input);
  const int64_t classes = dataset.num_classes;
  if (dataset.input_dtype == DType::i32) {
    // Next-token prediction: logits over a vocabulary at least the data's, per position.
    int64_t length = dataset.train.labels_per_record;
    if (config.kind == "gpt2" && config.gpt2.vocab_size < classes) {
      fail(kUnknownSite,
           fmt::format("model.gpt2.vocab_size = {} is smaller than the data's vocabulary of {} "
                       "tokens (data.label.num_classes; 256 for text)",
                       config.gpt2.vocab_size, classes),
           fmt::format("set model.gpt2.vocab_size = {}", classes));
    }
    if (output.shape.rank() != 3 || output.shape[1] != length || output.shape[2] < classes) {
      fail(kUnknownSite,
           fmt::format("model: a language model gives logits f32[batch,{},vocab] with vocab >= "
                       "the data's {} tokens; the model gives {} for input {}",
                       length, classes, output.to_string(), input.to_string()));
    }
    return;
  }
  if (output.shape.rank() != 2 || output.shape[1] != classes) {
    fail(kUnknownSite,
         fmt::format("model: the last layer must give {} logits per example (f32[batch,{}]); "
                     "the layers give {} for input {}",
                     classes, classes, output.to_string(), input.to_string()),
         fmt::format("end [[model.layers]] with a dense layer of features = {}", classes));
  }
}

}  // namespace kiln::train
