// [data], [data.features], [data.label] -> data::DatasetSpec.
#include "train/builders.h"

namespace kiln::train {

data::DatasetSpec build_dataset_spec(const DataConfig& config) {
  data::DatasetSpec spec;
  spec.kind = config.dataset;
  spec.dir = config.dir;
  spec.train_features = config.train_features;
  spec.train_labels = config.train_labels;
  spec.test_features = config.test_features;
  spec.test_labels = config.test_labels;
  spec.train_file = config.train_file;
  spec.test_file = config.test_file;
  spec.context = config.context;
  spec.test_fraction = config.test_fraction;
  spec.test_split = config.test_split;
  spec.split_seed = config.split_seed;
  spec.header = config.header;
  spec.skip_lines = config.skip_lines;
  spec.feature_columns = config.feature_columns;
  spec.label_column = config.label_column;
  spec.label_names = config.label_names;
  spec.train_limit = config.train_limit;
  spec.test_limit = config.test_limit;
  spec.on_violation = config.on_violation;
  spec.normalize = config.normalize;
  // The schema allows only "any" or a dtype name.
  if (config.features.dtype != "any") spec.features.dtype = dtype_from_name(config.features.dtype);
  spec.features.shape = config.features.shape;
  spec.features.min = config.features.min;
  spec.features.max = config.features.max;
  spec.features.finite = config.features.finite;
  spec.labels.num_classes = config.label.num_classes;
  spec.labels.min_per_class = config.label.min_per_class;
  return spec;
}

}  // namespace kiln::train
