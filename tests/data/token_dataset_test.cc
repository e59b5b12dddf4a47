// Language-model datasets (data/token_dataset.h): a corpus cut into records of `context`
// tokens whose labels are the next tokens, the test split taken from the corpus's end, and
// the bad cases (no context, a corpus too short, a token outside the vocabulary, a missing
// file) as errors naming the key or the file.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "data/batch.h"
#include "data/dataset.h"
#include "data/token_file.h"
#include "support/errors.h"
#include "support/scratch_dir.h"

namespace kiln::data {
namespace {

using kiln::testing::fails_with;

void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

std::vector<int32_t> features_of(const Split& split) {
  const auto* begin = reinterpret_cast<const int32_t*>(split.features.bytes.data());
  return {begin, begin + split.features.bytes.size() / sizeof(int32_t)};
}

DatasetSpec text_spec(const std::filesystem::path& file, int64_t context) {
  DatasetSpec spec;
  spec.kind = "text";
  spec.train_file = file.string();
  spec.context = context;
  spec.test_fraction = 0.25;
  return spec;
}

TEST(TokenDataset, TextRecordsPredictTheNextByteAndTheTestSplitIsTheEnd) {
  kiln::testing::ScratchDir dir;
  // 16 bytes: the last 4 (25%) are the test split; 12 training bytes give (12 - 1) / 3 = 3
  // records of 3, each labelled with the 3 bytes after its own.
  write_text(dir / "corpus.txt", "abcdefghijklMNOP");
  Dataset dataset = load_dataset(text_spec(dir / "corpus.txt", 3));
  EXPECT_EQ(dataset.num_classes, 256);
  EXPECT_EQ(dataset.input_dtype, DType::i32);
  EXPECT_EQ(dataset.record_shape, std::vector<int64_t>{3});
  EXPECT_EQ(dataset.normalize, "none");
  ASSERT_EQ(dataset.train.size(), 3);
  EXPECT_EQ(dataset.train.labels_per_record, 3);
  EXPECT_EQ(features_of(dataset.train),
            (std::vector<int32_t>{'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i'}));
  EXPECT_EQ(dataset.train.labels,
            (std::vector<int32_t>{'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j'}));
  // "MNOP": one record "MNO" -> "NOP"; no token of the training text.
  ASSERT_EQ(dataset.test.size(), 1);
  EXPECT_EQ(features_of(dataset.test), (std::vector<int32_t>{'M', 'N', 'O'}));
  EXPECT_EQ(dataset.test.labels, (std::vector<int32_t>{'N', 'O', 'P'}));
  EXPECT_EQ(dataset.files.size(), 1u);
  EXPECT_EQ(dataset.identity.size(), 64u);

  // A batch holds a row of labels per record.
  Sampler sampler({dataset.train.size(), 0, false, {}});
  BatchAssembler assembler(dataset, dataset.train, sampler, {.batch_size = 2});
  HostBatch batch;
  assembler.assemble(0, 1, batch);
  EXPECT_EQ(batch.rows(), 1);
  EXPECT_EQ(batch.shape, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(batch.labels, (std::vector<int32_t>{'h', 'i', 'j'}));
  EXPECT_EQ(batch.features.data()[0], static_cast<float>('g'));
}

TEST(TokenDataset, LimitsContextAndIdentity) {
  kiln::testing::ScratchDir dir;
  write_text(dir / "corpus.txt", std::string(400, 'x') + std::string(100, 'y'));
  DatasetSpec spec = text_spec(dir / "corpus.txt", 10);
  spec.test_fraction = 0.2;
  Dataset all = load_dataset(spec);
  EXPECT_EQ(all.train.size(), 39);  // (400 - 1) / 10
  EXPECT_EQ(all.test.size(), 9);    // (100 - 1) / 10
  spec.train_limit = 5;
  spec.test_limit = 2;
  Dataset limited = load_dataset(spec);
  EXPECT_EQ(limited.train.size(), 5);
  EXPECT_EQ(limited.test.size(), 2);
  EXPECT_NE(limited.identity, all.identity);
  spec = text_spec(dir / "corpus.txt", 20);
  spec.test_fraction = 0.2;
  EXPECT_NE(load_dataset(spec).identity, all.identity);
  spec.context = 10;
  EXPECT_EQ(load_dataset(spec).identity, all.identity);  // the same inputs, the same dataset
}

TEST(TokenDataset, TokenFilesAndATestFile) {
  kiln::testing::ScratchDir dir;
  std::vector<uint16_t> train(41), test(11);
  for (size_t i = 0; i < train.size(); ++i) train[i] = static_cast<uint16_t>(1000 + i);
  for (size_t i = 0; i < test.size(); ++i) test[i] = static_cast<uint16_t>(50000 + i);
  write_token_file(dir / "train.bin", train);
  write_token_file(dir / "test.bin", test);
  DatasetSpec spec;
  spec.kind = "tokens";
  spec.train_file = (dir / "train.bin").string();
  spec.test_file = (dir / "test.bin").string();
  spec.context = 5;
  spec.labels.num_classes = 50257;
  Dataset dataset = load_dataset(spec);
  EXPECT_EQ(dataset.num_classes, 50257);
  EXPECT_EQ(dataset.train.size(), 8);
  EXPECT_EQ(dataset.test.size(), 2);
  EXPECT_EQ(dataset.train.labels.back(), 1040);
  EXPECT_EQ(features_of(dataset.test).front(), 50000);
  EXPECT_EQ(dataset.files.size(), 2u);
}

TEST(TokenDataset, BadInputIsAnErrorNamingTheKeyOrTheFile) {
  kiln::testing::ScratchDir dir;
  write_text(dir / "corpus.txt", std::string(100, 'z'));
  DatasetSpec spec = text_spec(dir / "corpus.txt", 0);
  EXPECT_TRUE(fails_with([&] { load_dataset(spec); }, {"data.context must be >= 1"}));
  spec.context = 60;  // 75 training bytes hold one record, 25 test bytes none
  EXPECT_TRUE(fails_with([&] { load_dataset(spec); },
                         {"1 training and 0 test records of 60 tokens", "corpus.txt"}));
  spec.context = 8;
  spec.test_split = "shuffled";
  EXPECT_TRUE(fails_with([&] { load_dataset(spec); }, {"the end of the corpus"}));
  spec.test_split = "last";
  spec.train_file = (dir / "missing.txt").string();
  EXPECT_TRUE(fails_with([&] { load_dataset(spec); }, {"data.train_file", "missing.txt"}));
  spec.train_file.clear();
  EXPECT_TRUE(fails_with([&] { load_dataset(spec); }, {"data.train_file", "needs a file"}));
  spec.train_file = (dir / "corpus.txt").string();
  spec.labels.num_classes = 100;
  EXPECT_TRUE(fails_with([&] { load_dataset(spec); }, {"need a vocabulary of 256"}));

  // A token past the vocabulary, named with its position; a token file's vocabulary is
  // required; a text file given as a token file is named as such.
  std::vector<uint16_t> tokens(30, 7);
  tokens[17] = 300;
  write_token_file(dir / "tokens.bin", tokens);
  DatasetSpec token_spec;
  token_spec.kind = "tokens";
  token_spec.train_file = (dir / "tokens.bin").string();
  token_spec.context = 4;
  EXPECT_TRUE(fails_with([&] { load_dataset(token_spec); }, {"data.label.num_classes"}));
  token_spec.labels.num_classes = 256;
  EXPECT_TRUE(
      fails_with([&] { load_dataset(token_spec); }, {"tokens.bin", "token 300 at position 17"}));
  token_spec.train_file = (dir / "corpus.txt").string();
  EXPECT_TRUE(fails_with([&] { load_dataset(token_spec); },
                         {"corpus.txt", "shorter than the 1024-byte header"}));
}

}  // namespace
}  // namespace kiln::data
