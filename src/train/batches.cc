// Cutting batches out of the host copy of a split.
#include "train/batches.h"

#include <algorithm>
#include <numeric>

#include "kiln/ops.h"
#include "kiln/random.h"

namespace kiln::train {

ImageBatches::ImageBatches(const data::ImageSplit& split, int64_t batch_size)
    : split_(split), batch_size_(batch_size), num_examples_(split.labels.dims.at(0)) {
  pixels_ = 1;
  for (size_t axis = 1; axis < split.images.dims.size(); ++axis) pixels_ *= split.images.dims[axis];
  keep_file_order();
}

int64_t ImageBatches::batches_per_epoch() const {
  // Not (n + b - 1) / b, which overflows for a batch size near INT64_MAX.
  return num_examples_ / batch_size_ + (num_examples_ % batch_size_ != 0 ? 1 : 0);
}

void ImageBatches::shuffle(const Array& key, int64_t epoch) {
  Array epoch_key = random::fold_in(key, static_cast<uint32_t>(epoch));
  order_ = random::permutation(epoch_key, num_examples_).to_vector<int32_t>();
}

void ImageBatches::keep_file_order() {
  order_.resize(static_cast<size_t>(num_examples_));
  std::iota(order_.begin(), order_.end(), 0);
}

Batch ImageBatches::batch(int64_t index) const {
  int64_t begin = index * batch_size_;
  int64_t count = std::min(batch_size_, num_examples_ - begin);
  std::vector<float> pixels(static_cast<size_t>(count * pixels_));
  std::vector<int32_t> labels(static_cast<size_t>(count));
  constexpr float kScale = 1.0f / 255.0f;
  for (int64_t row = 0; row < count; ++row) {
    int64_t example = order_[static_cast<size_t>(begin + row)];
    const uint8_t* source = split_.images.values.data() + example * pixels_;
    float* target = pixels.data() + row * pixels_;
    for (int64_t i = 0; i < pixels_; ++i) target[i] = static_cast<float>(source[i]) * kScale;
    labels[static_cast<size_t>(row)] = split_.labels.values[static_cast<size_t>(example)];
  }
  Shape image_shape{count, split_.images.dims.at(1), split_.images.dims.at(2), 1};
  return Batch{from_host<float>(pixels, image_shape), from_host<int32_t>(labels, Shape{count})};
}

}  // namespace kiln::train
