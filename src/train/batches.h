// Shuffled mini-batches of an image-classification split held on the host as u8 pixels.
// Each epoch's order is a permutation drawn from the run's seed and the epoch number, so
// a run's data order is a function of its config alone (and JAX-compatible:
// jax.random.permutation on the same key gives the same order). Pixels become f32 in
// [0, 1] (x / 255) as a batch is cut, so the f32 copy of the whole dataset never exists.
#pragma once

#include <cstdint>
#include <vector>

#include "data/idx.h"
#include "kiln/array.h"

namespace kiln::train {

struct Batch {
  Array images;  // f32[n, height, width, 1]
  Array labels;  // i32[n]
};

class ImageBatches {
 public:
  ImageBatches(const data::ImageSplit& split, int64_t batch_size);
  int64_t num_examples() const { return num_examples_; }
  // Batches per epoch; the last one may be smaller (kept, as PyTorch's DataLoader does).
  int64_t batches_per_epoch() const;
  // Draws epoch `epoch`'s order from `key` (for training), or keeps the file order.
  void shuffle(const Array& key, int64_t epoch);
  void keep_file_order();
  // Batch `index` of the current order.
  Batch batch(int64_t index) const;

 private:
  const data::ImageSplit& split_;
  int64_t batch_size_;
  int64_t num_examples_;
  int64_t pixels_;  // per image
  std::vector<int32_t> order_;
};

}  // namespace kiln::train
