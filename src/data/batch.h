// Cutting batches: batch `index` of epoch `epoch` is the records the sampler puts at
// positions [index * batch_size, ...) of that epoch, converted to f32 with the dataset's
// preprocessing and, for training, augmented per example. A batch is a pure function of
// (dataset, sampler, options, epoch, index), so any thread may assemble any batch.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "data/dataset.h"
#include "data/sampler.h"

namespace kiln::data {

// Per-example augmentation of 2-D (image) records, drawn from
// threefry(key, (global_index >> 32, global_index & 0xffffffff)) — jax.random.fold_in(key,
// global_index) for indices below 2^32 — so it depends on neither the worker, the batch size
// nor where a run resumed.
struct AugmentOptions {
  int64_t crop_padding = 0;      // > 0: pad by this many zero pixels, crop back at random
  bool horizontal_flip = false;  // mirror left-right with probability 1/2
  uint32_t key[2] = {0, 0};
  bool enabled() const { return crop_padding > 0 || horizontal_flip; }
};

// Host memory aligned to 64 bytes (a cache line, and any SIMD load) for a batch's features.
class AlignedFloats {
 public:
  void resize(size_t count);
  float* data() { return data_.get(); }
  const float* data() const { return data_.get(); }
  size_t size() const { return size_; }

 private:
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  std::unique_ptr<float[], Free> data_;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

struct HostBatch {
  int64_t epoch = 0;
  int64_t index = 0;
  std::vector<int64_t> shape;  // [examples, ...model input per example]
  AlignedFloats features;
  std::vector<int32_t> labels;   // labels_per_row per row
  int64_t labels_per_row = 1;    // the split's labels_per_record
  std::vector<int64_t> records;  // which records, in order (for tests and debugging)
  // BatchOptions::pad_remainder: the last `padding` rows are zeros (label 0) that only
  // fill the batch to its full shape; `mask` is 1 for each real row and 0 for those.
  // Without padding, mask is empty.
  int64_t padding = 0;
  std::vector<float> mask;
  // Poisson sampling: records sampled for this batch but left out because it has no room
  // for them (PoissonSampling::rows).
  int64_t truncated = 0;
  int64_t rows() const { return static_cast<int64_t>(labels.size()) / labels_per_row; }
  int64_t examples() const { return rows() - padding; }  // the real ones
};

// Poisson sampling (DP-SGD's, docs/privacy.md): batch (epoch, index) is step s = epoch x
// batches_per_epoch + index, and takes each record r of the split independently with
// probability `rate`: r is in when the 64 bits threefry(threefry(key, s), r) are below
// rate x 2^64, an integer comparison, so the draw is the same on every machine. A batch
// has `rows` rows, the sampled records in record order and then masked-out zero rows; a
// draw of more than `rows` records keeps the first `rows` and counts the rest
// (HostBatch::truncated). An epoch is ceil(N / batch_size) batches, batch_size being the
// expected size rate x N.
struct PoissonSampling {
  double rate = 0;   // in (0, 1]; 0: off (the sampler's order)
  int64_t rows = 0;  // rows of every batch, >= 1
  uint32_t key[2] = {0, 0};
  bool enabled() const { return rate > 0; }
};

struct BatchOptions {
  int64_t batch_size = 1;
  // Leave out the last, smaller batch of an epoch (every step then has one shape).
  bool drop_remainder = false;
  // Or fill it up to batch_size with masked-out rows, and give every batch a mask (every
  // step has one shape, and no example is left out).
  bool pad_remainder = false;
  AugmentOptions augment;
  PoissonSampling poisson;
};

// The model's input shape per example: the record shape, with a channel axis of 1 added to
// 2-D records (grey images become NHWC).
std::vector<int64_t> example_input_shape(const std::vector<int64_t>& record_shape);

class BatchAssembler {
 public:
  // Keeps references to `dataset` and `split`: they must outlive the assembler.
  BatchAssembler(const Dataset& dataset, const Split& split, const Sampler& sampler,
                 const BatchOptions& options);
  int64_t batches_per_epoch() const;
  int64_t batch_size() const { return options_.batch_size; }
  const Sampler& sampler() const { return sampler_; }
  // Thread-safe: reads only shared immutable data and writes only `out`.
  void assemble(int64_t epoch, int64_t index, HostBatch& out) const;

 private:
  // The records batch (epoch, index) draws with Poisson sampling, in record order.
  std::vector<int64_t> poisson_records(int64_t epoch, int64_t index) const;
  void convert_record(int64_t record, int64_t global_index, float* out) const;

  const Dataset& dataset_;
  const Split& split_;
  Sampler sampler_;
  BatchOptions options_;
  std::vector<int64_t> example_shape_;
  int64_t record_size_ = 0;
};

}  // namespace kiln::data
