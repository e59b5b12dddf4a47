// What a batch's predictions add up to: the summed loss, the correct predictions and how
// many labels count. Every step kind computes its loss and metrics from these (the
// one-device step divides the loss by the count, the data-parallel step first adds its
// chunks' sums, evaluation reports the sums), so the three agree by construction.
#pragma once

#include <cstdint>

#include "kiln/array.h"

namespace kiln::train {

struct PredictionSums {
  Array loss_sum;  // f32[]: softmax cross-entropy summed over every label that counts
  Array correct;   // i32[]: labels the argmax of the logits predicts
  Array count;     // f32[]: labels that count: the mask's rows (or all) times labels per row
};

// logits [rows, ..., classes], labels [rows, ...] (one per row for a classifier, one per
// token [rows, T] for a language model), mask f32[rows] (1 a real row, 0 padding, whose
// labels add exact zeros) or undefined (every row counts).
PredictionSums prediction_sums(const Array& logits, const Array& labels, const Array& mask);

// Labels per row: 1 for classes [n], T for next tokens [n, T].
int64_t labels_per_row(const Array& labels);

}  // namespace kiln::train
