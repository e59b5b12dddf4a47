// Language-model datasets: a corpus of tokens cut into records of `context` tokens, each
// record's labels the `context` tokens that follow its positions (the next-token targets),
// so a record reads context + 1 consecutive tokens. Records do not overlap: record i starts
// at token i * context, as llm.c's loader reads its batches.
//
//   text:   a text file read as bytes, one token per byte (byte_tokenizer.h; vocabulary 256)
//   tokens: a token file (token_file.h), its vocabulary given as data.label.num_classes
//
// Without a test file, the test split is the corpus's last test_fraction of tokens: the two
// splits share no token, and neighbouring text (a verse cut in two) never sits on both
// sides, which a random choice of records would do.
#pragma once

#include "data/dataset.h"

namespace kiln::data {

// kind "text" or "tokens". Errors name the file and what is wrong: unreadable, a token file
// whose header does not match, a token outside the vocabulary (with its position), a split
// too short for one record.
Dataset load_token_dataset(const DatasetSpec& spec, ViolationPolicy policy);

}  // namespace kiln::data
