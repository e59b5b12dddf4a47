// Host batches -> arrays, and a run's data pipeline from its config.
#include "train/batches.h"

#include <vector>

#include "kiln/ops.h"
#include "train/builders.h"

namespace kiln::train {

Batch to_arrays(const data::HostBatch& batch, DType input_dtype) {
  Shape shape{std::span<const int64_t>(batch.shape)};
  std::span<const float> features(batch.features.data(), batch.features.size());
  // Token inputs get a label per token, [rows, T], even when T is 1.
  Shape label_shape =
      input_dtype == DType::i32 ? Shape{batch.rows(), batch.labels_per_row} : Shape{batch.rows()};
  Batch out{Array(), from_host<int32_t>(batch.labels, label_shape), Array()};
  if (input_dtype == DType::i32) {
    std::vector<int32_t> ids(features.begin(), features.end());
    out.images = from_host<int32_t>(ids, shape);
  } else {
    out.images = from_host<float>(features, shape);
  }
  if (!batch.mask.empty()) out.mask = from_host<float>(batch.mask, Shape{batch.rows()});
  return out;
}

RunData::RunData(const TrainConfig& config, const Array& augment_key)
    : dataset(data::load_dataset(build_dataset_spec(config.data))) {
  data::BatchOptions train_options;
  train_options.batch_size = config.train.batch_size;
  train_options.drop_remainder = config.train.drop_remainder;
  train_options.pad_remainder = config.train.pad_remainder;
  train_options.augment.crop_padding = config.data.augment.crop_padding;
  train_options.augment.horizontal_flip = config.data.augment.horizontal_flip;
  std::vector<uint32_t> key = augment_key.to_vector<uint32_t>();
  train_options.augment.key[0] = key.at(0);
  train_options.augment.key[1] = key.at(1);
  data::SamplerOptions train_sampler{dataset.train.size(), config.experiment.seed, true, {}};
  train = std::make_unique<data::BatchAssembler>(dataset, dataset.train,
                                                 data::Sampler(train_sampler), train_options);
  train_options_ = train_options;
  set_eval_batch_size(config.train.eval_batch_size);
  loader_options.workers = static_cast<int>(config.data.workers);
  loader_options.prefetch = static_cast<int>(config.data.prefetch);
}

void RunData::use_poisson_sampling(double rate, int64_t rows, const Array& key) {
  data::BatchOptions options = train_options_;
  options.poisson.rate = rate;
  options.poisson.rows = rows;
  std::vector<uint32_t> words = key.to_vector<uint32_t>();
  options.poisson.key[0] = words.at(0);
  options.poisson.key[1] = words.at(1);
  train = std::make_unique<data::BatchAssembler>(dataset, dataset.train, train->sampler(), options);
  train_options_ = options;
}

void RunData::set_eval_batch_size(int64_t eval_batch_size) {
  data::BatchOptions test_options;
  test_options.batch_size = eval_batch_size;
  data::SamplerOptions test_sampler{dataset.test.size(), 0, false, {}};
  test = std::make_unique<data::BatchAssembler>(dataset, dataset.test, data::Sampler(test_sampler),
                                                test_options);
}

}  // namespace kiln::train
