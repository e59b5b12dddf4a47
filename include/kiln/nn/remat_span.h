// A run of a Sequential's children rematerialized together (nn::Sequential's second form,
// module.h): what nn::Remat around a Sequential of those children would do, except that
// they keep their names and positions in the outer Sequential, so that the params keep
// their paths ("dense_2/kernel") and a config can turn remat on and off per block without
// changing the checkpoint's layout.
//
//   nn::Module model = nn::Sequential(
//       {nn::Conv2D(32, {3, 3}), nn::Relu(), nn::MaxPool({2, 2}), nn::Flatten(), nn::Dense(10)},
//       {{.first = 0, .count = 3, .policy = save_nothing()}});   // the conv block
#pragma once

#include <cstdint>

#include "kiln/checkpoint.h"

namespace kiln::nn {

struct RematSpan {
  int64_t first = 0;  // the position of the span's first child
  int64_t count = 1;  // children in the span, at least 1
  CheckpointPolicy policy = {};
};

}  // namespace kiln::nn
