// Batch assembly (batch.h): one record at a time, the dtype dispatched once per record,
// the preprocessing fused into the conversion, augmentation as index arithmetic on the
// source (no intermediate image).
#include "data/batch.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "kernels/threefry.h"
#include "kiln/error.h"
#include "kiln/shape.h"

namespace kiln::data {
namespace {

constexpr size_t kAlignment = 64;

template <class T>
float load_as_float(const uint8_t* at) {
  T value;
  std::memcpy(&value, at, sizeof(T));
  if constexpr (std::is_same_v<T, f16> || std::is_same_v<T, bf16>) {
    return value.to_float();
  } else {
    return static_cast<float>(value);
  }
}

// Raw element -> f32 for every dtype, chosen once per record.
using LoadFn = float (*)(const uint8_t*);
LoadFn loader_for(DType dtype) {
  switch (dtype) {
    case DType::bool_:
      return [](const uint8_t* at) { return *at ? 1.0f : 0.0f; };
    case DType::u8:
      return load_as_float<uint8_t>;
    case DType::i32:
      return load_as_float<int32_t>;
    case DType::i64:
      return load_as_float<int64_t>;
    case DType::u32:
      return load_as_float<uint32_t>;
    case DType::f16:
      return load_as_float<f16>;
    case DType::bf16:
      return load_as_float<bf16>;
    case DType::f32:
      return load_as_float<float>;
    case DType::f64:
      return load_as_float<double>;
  }
  return load_as_float<float>;
}

}  // namespace

void AlignedFloats::resize(size_t count) {
  if (count > capacity_) {
    size_t bytes = (count * sizeof(float) + kAlignment - 1) / kAlignment * kAlignment;
    auto* memory = static_cast<float*>(std::aligned_alloc(kAlignment, bytes));
    if (!memory) fail(kUnknownSite, fmt::format("out of memory for a batch of {} bytes", bytes));
    data_.reset(memory);
    capacity_ = count;
  }
  size_ = count;
}

std::vector<int64_t> example_input_shape(const std::vector<int64_t>& record_shape) {
  std::vector<int64_t> shape = record_shape;
  if (shape.size() == 2) shape.push_back(1);
  return shape;
}

BatchAssembler::BatchAssembler(const Dataset& dataset, const Split& split, const Sampler& sampler,
                               const BatchOptions& options)
    : dataset_(dataset),
      split_(split),
      sampler_(sampler),
      options_(options),
      example_shape_(example_input_shape(dataset.record_shape)),
      record_size_(split.features.record_size()) {
  if (options.batch_size < 1) {
    fail(kUnknownSite, fmt::format("batch size must be >= 1, got {}", options.batch_size));
  }
  if (sampler.num_records() != split.size()) {
    fail(kUnknownSite, fmt::format("the sampler covers {} records, the split holds {}",
                                   sampler.num_records(), split.size()));
  }
  if (options.drop_remainder && options.pad_remainder) {
    fail(kUnknownSite,
         "an epoch's last batch can be left out (drop_remainder) or padded "
         "(pad_remainder), not both");
  }
  if (options.poisson.enabled()) {
    if (!(options.poisson.rate <= 1.0) || options.poisson.rows < 1) {
      fail(kUnknownSite, fmt::format("Poisson sampling at rate {} into batches of {} rows: the "
                                     "rate must be in (0, 1] and the rows at least 1",
                                     options.poisson.rate, options.poisson.rows));
    }
    if (sampler.options().shard.count != 1) {
      fail(kUnknownSite, "Poisson sampling draws from the whole split: it takes no shards");
    }
  }
  if (options.augment.enabled() && dataset.record_shape.size() != 2) {
    fail(kUnknownSite,
         fmt::format("augmentation (random crop, horizontal flip) needs 2-D image records, the "
                     "records have shape {}",
                     dims_to_string(dataset.record_shape)),
         "set data.augment.crop_padding = 0 and data.augment.horizontal_flip = false");
  }
}

int64_t BatchAssembler::batches_per_epoch() const {
  int64_t length = sampler_.epoch_length();
  int64_t size = options_.batch_size;
  if (options_.poisson.enabled()) return length / size + (length % size != 0 ? 1 : 0);
  // Not (n + b - 1) / b, which overflows for a batch size near INT64_MAX.
  return length / size + (!options_.drop_remainder && length % size != 0 ? 1 : 0);
}

void BatchAssembler::assemble(int64_t epoch, int64_t index, HostBatch& out) const {
  if (index < 0 || index >= batches_per_epoch()) {
    fail(kUnknownSite,
         fmt::format("batch {} of an epoch of {} batches", index, batches_per_epoch()));
  }
  const PoissonSampling& poisson = options_.poisson;
  int64_t begin = index * options_.batch_size;
  int64_t count = 0;
  int64_t rows = 0;
  out.truncated = 0;
  if (poisson.enabled()) {
    out.records = poisson_records(epoch, index);
    count = std::min<int64_t>(poisson.rows, static_cast<int64_t>(out.records.size()));
    out.truncated = static_cast<int64_t>(out.records.size()) - count;
    out.records.resize(static_cast<size_t>(count));
    rows = poisson.rows;
  } else {
    count = std::min(options_.batch_size, sampler_.epoch_length() - begin);
    rows = options_.pad_remainder ? options_.batch_size : count;
    out.records.resize(static_cast<size_t>(count));
    sampler_.records(epoch, begin, count, out.records.data());
  }
  out.epoch = epoch;
  out.index = index;
  out.shape = {rows};
  out.shape.insert(out.shape.end(), example_shape_.begin(), example_shape_.end());
  const int64_t width = split_.labels_per_record;
  out.labels_per_row = width;
  out.labels.resize(static_cast<size_t>(rows * width));
  out.features.resize(static_cast<size_t>(rows * record_size_));
  // A Poisson batch's examples are augmented by (step, record), each epoch's by position.
  const int64_t step = epoch * batches_per_epoch() + index;
  for (int64_t row = 0; row < count; ++row) {
    int64_t record = out.records[static_cast<size_t>(row)];
    std::copy_n(split_.labels.begin() + record * width, width, out.labels.begin() + row * width);
    convert_record(record,
                   poisson.enabled() ? step * split_.size() + record
                                     : sampler_.global_index(epoch, begin + row),
                   out.features.data() + row * record_size_);
  }
  out.padding = rows - count;
  out.mask.clear();
  if (options_.pad_remainder || poisson.enabled()) {
    // Zeros, not a copy of a real example: the padding must not look like data.
    std::fill(out.labels.begin() + count * width, out.labels.end(), 0);
    std::fill(out.features.data() + count * record_size_, out.features.data() + rows * record_size_,
              0.0f);
    out.mask.assign(static_cast<size_t>(rows), 0.0f);
    std::fill(out.mask.begin(), out.mask.begin() + count, 1.0f);
  }
}

std::vector<int64_t> BatchAssembler::poisson_records(int64_t epoch, int64_t index) const {
  const PoissonSampling& poisson = options_.poisson;
  auto step = static_cast<uint64_t>(epoch * batches_per_epoch() + index);
  auto step_key = threefry::hash(poisson.key[0], poisson.key[1], static_cast<uint32_t>(step >> 32),
                                 static_cast<uint32_t>(step));
  // rate x 2^64 as an integer; every draw is below it at rate 1.
  const bool everything = poisson.rate >= 1.0;
  const auto threshold = everything ? 0 : static_cast<uint64_t>(std::ldexp(poisson.rate, 64));
  std::vector<int64_t> records;
  records.reserve(static_cast<size_t>(poisson.rate * static_cast<double>(split_.size()) * 1.25) +
                  16);
  for (int64_t record = 0; record < split_.size(); ++record) {
    auto r = static_cast<uint64_t>(record);
    auto bits = threefry::hash(step_key[0], step_key[1], static_cast<uint32_t>(r >> 32),
                               static_cast<uint32_t>(r));
    uint64_t draw = (static_cast<uint64_t>(bits[0]) << 32) | bits[1];
    if (everything || draw < threshold) records.push_back(record);
  }
  return records;
}

void BatchAssembler::convert_record(int64_t record, int64_t global_index, float* out) const {
  const RawArray& features = split_.features;
  auto element_size = static_cast<size_t>(dtype_size(features.dtype));
  const uint8_t* source =
      features.bytes.data() + static_cast<size_t>(record * record_size_) * element_size;
  LoadFn load = loader_for(features.dtype);
  const std::vector<float>& scale = dataset_.scale;
  const std::vector<float>& offset = dataset_.offset;
  bool per_element = scale.size() > 1;
  auto transform = [&](int64_t i, float value) {
    size_t k = per_element ? static_cast<size_t>(i) : 0;
    return value * scale[k] + offset[k];
  };
  const AugmentOptions& augment = options_.augment;
  if (!augment.enabled()) {
    for (int64_t i = 0; i < record_size_; ++i) {
      out[i] = transform(i, load(source + static_cast<size_t>(i) * element_size));
    }
    return;
  }
  auto index = static_cast<uint64_t>(global_index);
  auto example_key =
      threefry::hash(augment.key[0], augment.key[1], static_cast<uint32_t>(index >> 32),
                     static_cast<uint32_t>(index));
  auto draws = threefry::hash(example_key[0], example_key[1], 0, 0);
  int64_t height = dataset_.record_shape[0];
  int64_t width = dataset_.record_shape[1];
  int64_t padding = augment.crop_padding;
  // Offsets in [-padding, padding]: the crop's corner in the padded image, minus padding.
  int64_t span = 2 * padding + 1;
  auto offset_of = [&](uint32_t bits) {
    return static_cast<int64_t>(bits % static_cast<uint32_t>(span)) - padding;
  };
  int64_t dy = offset_of(draws[0]);
  int64_t dx = offset_of(draws[1] >> 1);
  bool flip = augment.horizontal_flip && (draws[1] & 1u) != 0;
  for (int64_t y = 0; y < height; ++y) {
    int64_t sy = y + dy;
    for (int64_t x = 0; x < width; ++x) {
      int64_t i = y * width + x;
      int64_t sx = (flip ? width - 1 - x : x) + dx;
      bool inside = sy >= 0 && sy < height && sx >= 0 && sx < width;
      // Padding is a zero in the source's units, preprocessed like any pixel.
      float value =
          inside ? load(source + static_cast<size_t>(sy * width + sx) * element_size) : 0.0f;
      out[i] = transform(inside && per_element ? sy * width + sx : i, value);
    }
  }
}

}  // namespace kiln::data
