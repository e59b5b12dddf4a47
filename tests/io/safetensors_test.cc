// save_safetensors / load_safetensors: round trips of every dtype (empty and rank-0
// arrays, NaN payloads and 16-bit float bit patterns kept exactly), deterministic bytes,
// the exact bytes of a tiny file, Trees, atomic writes, and a cross-check with an
// independent Python reader and writer (tests/tools/safetensors_check.py).
#include "kiln/safetensors.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "io/scratch_files.h"
#include "kiln/ops.h"
#include "support/arrays.h"
#include "support/errors.h"
#include "support/source_tree.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using ::kiln::testing::error_of;
using ::kiln::testing::read_string;
using ::kiln::testing::same_bits;
using ::kiln::testing::ScratchDir;
using ::kiln::testing::values;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Arrays of every dtype with distinct values, plus empty and rank-0 ones.
NamedArrays every_dtype() {
  NamedArrays arrays;
  for (DType dtype : kAllDTypes) {
    std::string name(dtype_name(dtype));
    Array base = arange(6, DType::f32) - 2.0f;
    if (!is_signed_integer(dtype) && dtype != DType::bool_ && !is_floating(dtype)) {
      base = base + 2.0f;  // unsigned: no negatives
    }
    if (dtype == DType::bool_) base = (arange(6, DType::f32) > 2.5f).astype(DType::f32);
    arrays.emplace_back(name + "/matrix", astype(base, dtype).reshape({2, 3}));
    arrays.emplace_back(name + "/empty", zeros({0, 3}, dtype));
    arrays.emplace_back(name + "/scalar", full({}, 1.0, dtype));
  }
  return arrays;
}

TEST(Safetensors, RoundTripsEveryDType) {
  ScratchDir dir;
  NamedArrays arrays = every_dtype();
  save_safetensors(dir / "all.safetensors", arrays, {{"format", "pt"}, {"step", "12"}});
  SafetensorsFile file = load_safetensors(dir / "all.safetensors");
  EXPECT_EQ(file.metadata, (std::map<std::string, std::string>{{"format", "pt"}, {"step", "12"}}));
  ASSERT_EQ(file.arrays.size(), arrays.size());
  std::sort(arrays.begin(), arrays.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 0; i < arrays.size(); ++i) {
    EXPECT_EQ(file.arrays[i].first, arrays[i].first);
    EXPECT_TRUE(same_bits(file.arrays[i].second, arrays[i].second))
        << arrays[i].first << ": " << file.arrays[i].second.aval().to_string() << " "
        << file.arrays[i].second << " vs " << arrays[i].second;
  }
}

TEST(Safetensors, KeepsBitPatterns) {
  ScratchDir dir;
  float nan_payload;
  uint32_t bits = 0x7FC12345u;
  std::memcpy(&nan_payload, &bits, 4);
  NamedArrays arrays = {
      {"f32", from_host<float>({nan_payload, -0.0f, INFINITY, 1e-45f}, {4})},
      {"bf16",
       from_host<bf16>({bf16::from_bits(0x7FC1), bf16::from_bits(0x8000), bf16::from_bits(0x0001)},
                       {3})},
      {"f16", from_host<f16>({f16::from_bits(0x7E01), f16::from_bits(0x03FF)}, {2})},
      {"f64", from_host<double>({-0.0, 1e-310}, {2})},
  };
  save_safetensors(dir / "bits", arrays);
  SafetensorsFile file = load_safetensors(dir / "bits");
  ASSERT_EQ(file.arrays.size(), 4u);
  EXPECT_THAT(file.arrays[0].first, "bf16");  // name order
  EXPECT_TRUE(same_bits(file.arrays[0].second, arrays[1].second));
  EXPECT_TRUE(same_bits(file.arrays[1].second, arrays[2].second));
  EXPECT_TRUE(same_bits(file.arrays[2].second, arrays[0].second));
  EXPECT_TRUE(same_bits(file.arrays[3].second, arrays[3].second));
}

TEST(Safetensors, SameArraysGiveSameBytesInAnyOrder) {
  ScratchDir dir;
  NamedArrays arrays = every_dtype();
  save_safetensors(dir / "a", arrays, {{"k", "v"}});
  std::reverse(arrays.begin(), arrays.end());
  save_safetensors(dir / "b", arrays, {{"k", "v"}});
  save_safetensors(dir / "c", arrays, {{"k", "v"}});
  std::string a = read_string(dir / "a");
  EXPECT_EQ(a, read_string(dir / "b"));
  EXPECT_EQ(a, read_string(dir / "c"));
  uint64_t header = 0;
  std::memcpy(&header, a.data(), 8);
  EXPECT_EQ(header % 8, 0u);  // the data section starts 8-aligned
}

// The whole file, byte for byte, written out by hand.
TEST(Safetensors, GoldenBytes) {
  ScratchDir dir;
  save_safetensors(dir / "tiny",
                   NamedArrays{{"b", scalar(7, DType::i32)}, {"a", from_host<float>({1, 2}, {2})}},
                   {{"format", "pt"}});
  std::string header = R"({"__metadata__":{"format":"pt"},)"
                       R"("a":{"data_offsets":[0,8],"dtype":"F32","shape":[2]},)"
                       R"("b":{"data_offsets":[8,12],"dtype":"I32","shape":[]}})";
  ASSERT_EQ(header.size(), 138u);
  std::string expected = std::string("\x90\0\0\0\0\0\0\0", 8) + header + "      " +
                         std::string("\x00\x00\x80\x3f\x00\x00\x00\x40\x07\x00\x00\x00", 12);
  EXPECT_EQ(read_string(dir / "tiny"), expected);
  // The reference implementation's empty file: "{}" padded to 8 bytes.
  save_safetensors(dir / "empty", NamedArrays{});
  EXPECT_EQ(read_string(dir / "empty"), std::string("\x08\0\0\0\0\0\0\0{}      ", 16));
  EXPECT_THAT(load_safetensors(dir / "empty").arrays, IsEmpty());
}

TEST(Safetensors, TreeLeavesUnderTheirPaths) {
  ScratchDir dir;
  Tree params = Tree::dict({{"dense", Tree::dict({{"kernel", ones({2, 2})}, {"bias", zeros({2})}})},
                            {"layers", Tree::list({Tree(scalar(1.0)), Tree()})},
                            {"norm", Tree()}});
  save_safetensors(dir / "params", params);
  SafetensorsFile file = load_safetensors(dir / "params");
  std::vector<std::string> names;
  for (const auto& [name, array] : file.arrays) names.push_back(name);
  EXPECT_THAT(names, ElementsAre("dense/bias", "dense/kernel", "layers/0"));
  EXPECT_THAT(values(file.arrays[1].second), ElementsAre(1, 1, 1, 1));
  EXPECT_THAT(error_of([&] { save_safetensors(dir / "leaf", Tree(ones({3}))); }),
              HasSubstr("the tree is a single leaf f32[3], which has no path to name it"));
}

TEST(Safetensors, SaveRejectsBadNames) {
  ScratchDir dir;
  Array x = ones({2});
  EXPECT_THAT(error_of([&] {
                save_safetensors(dir / "f", NamedArrays{{"", x}});
              }),
              HasSubstr("a tensor name is empty"));
  EXPECT_THAT(
      error_of([&] {
        save_safetensors(dir / "f", NamedArrays{{"w", x}, {"b", x}, {"w", x}});
      }),
      HasSubstr("save_safetensors: '" + (dir / "f").string() + "': the name 'w' is given twice"));
  EXPECT_THAT(error_of([&] {
                save_safetensors(dir / "f", NamedArrays{{"__metadata__", x}});
              }),
              HasSubstr("'__metadata__' is reserved"));
  EXPECT_THAT(error_of([&] {
                save_safetensors(dir / "f", NamedArrays{{"w", Array()}});
              }),
              HasSubstr("array 'w' is undefined"));
  EXPECT_THAT(error_of([&] {
                save_safetensors(dir / "f", NamedArrays{{"\xff", x}});
              }),
              HasSubstr("must be valid UTF-8"));
  EXPECT_THAT(dir.listing(), IsEmpty());
}

TEST(Safetensors, FailedSaveLeavesNoFile) {
  ScratchDir dir;
  // An array whose computation fails: integer division by zero surfaces when it is saved.
  Array broken = div(from_host<int32_t>({1, 2}, {2}), from_host<int32_t>({1, 0}, {2}));
  std::string message = error_of([&] {
    save_safetensors(dir / "model.safetensors", NamedArrays{{"a", ones({4})}, {"b", broken}});
  });
  EXPECT_THAT(message, HasSubstr("integer division by zero"));
  EXPECT_THAT(dir.listing(), IsEmpty());
  // An existing file stays as it was.
  save_safetensors(dir / "model.safetensors", NamedArrays{{"a", ones({4})}});
  std::string before = read_string(dir / "model.safetensors");
  EXPECT_THROW(save_safetensors(dir / "model.safetensors", NamedArrays{{"b", broken}}), Error);
  EXPECT_EQ(read_string(dir / "model.safetensors"), before);
  EXPECT_THAT(dir.listing(), ElementsAre("model.safetensors"));
  // A missing directory.
  EXPECT_THAT(error_of([&] {
                save_safetensors(dir / "absent/model", NamedArrays{{"a", ones({1})}});
              }),
              HasSubstr("No such file or directory"));
  EXPECT_THAT(dir.listing(), ElementsAre("model.safetensors"));
}

// --- the independent Python implementation ---------------------------------------------

fs::path python_tool() {
  return kiln::testing::source_dir() / "tests/tools/safetensors_check.py";
}
// The real safetensors package, from the pinned peers' environment (scripts/setup).
fs::path peer_tool() {
  return kiln::testing::source_dir() / "tests/tools/safetensors_peer.py";
}

bool python_with_numpy() {
  return std::system("/usr/bin/python3 -c 'import numpy' > /dev/null 2>&1") == 0;
}

// `tool` reads a file kiln wrote with every dtype and prints each tensor's dtype, shape and
// sum, which must be kiln's.
void expect_tool_reads_what_kiln_writes(const fs::path& tool) {
  ScratchDir dir;
  NamedArrays arrays = every_dtype();
  arrays.emplace_back("big", arange(1000, DType::f32) * 0.25f);
  save_safetensors(dir / "kiln.safetensors", arrays, {{"format", "pt"}});
  std::string command = fmt::format("/usr/bin/python3 {} {} > {} 2>&1", tool.string(),
                                    (dir / "kiln.safetensors").string(), (dir / "out").string());
  ASSERT_EQ(std::system(command.c_str()), 0) << read_string(dir / "out");
  std::sort(arrays.begin(), arrays.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::istringstream lines(read_string(dir / "out"));
  std::string line;
  size_t index = 0;
  while (std::getline(lines, line)) {
    std::vector<std::string> fields;
    std::istringstream parts(line);
    for (std::string field; std::getline(parts, field, '\t');) fields.push_back(field);
    ASSERT_GE(fields.size(), 3u) << line;
    if (fields[0] == "metadata") {
      EXPECT_EQ(fields[1], "format");
      EXPECT_EQ(fields[2], "pt");
      continue;
    }
    ASSERT_EQ(fields.size(), 5u) << line;
    ASSERT_LT(index, arrays.size());
    const auto& [name, array] = arrays[index++];
    EXPECT_EQ(fields[1], name);
    std::string dtype = fields[2];
    std::transform(dtype.begin(), dtype.end(), dtype.begin(), ::tolower);
    EXPECT_EQ(dtype, dtype_name(array.dtype())) << name;
    EXPECT_EQ(fields[3], array.shape().to_string()) << name;
    double sum = 0;
    for (double v : values(array)) sum += v;
    EXPECT_NEAR(std::stod(fields[4]), sum, 1e-9 * (1 + std::abs(sum))) << name;
  }
  EXPECT_EQ(index, arrays.size());
}

TEST(Safetensors, PythonReadsWhatKilnWrites) {
  if (!python_with_numpy()) GTEST_SKIP() << "no /usr/bin/python3 with numpy";
  expect_tool_reads_what_kiln_writes(python_tool());
}

TEST(Safetensors, TheSafetensorsPackageReadsWhatKilnWrites) {
  expect_tool_reads_what_kiln_writes(peer_tool());
}

// `tool` writes its fixed set of tensors (every dtype, a scalar, an empty tensor) with
// `source` in the metadata; kiln reads each back with its values.
void expect_kiln_reads_what_tool_writes(const fs::path& tool, const std::string& source) {
  ScratchDir dir;
  std::string command = fmt::format("/usr/bin/python3 {} --write {} > {} 2>&1", tool.string(),
                                    (dir / "py.safetensors").string(), (dir / "out").string());
  ASSERT_EQ(std::system(command.c_str()), 0) << read_string(dir / "out");
  SafetensorsFile file = load_safetensors(dir / "py.safetensors");
  EXPECT_EQ(file.metadata,
            (std::map<std::string, std::string>{{"format", "pt"}, {"source", source}}));
  std::map<std::string, Array> by_name(file.arrays.begin(), file.arrays.end());
  ASSERT_EQ(by_name.size(), 10u);
  EXPECT_EQ(by_name["weights/kernel"].aval().to_string(), "f32[2,3]");
  EXPECT_THAT(values(by_name["weights/kernel"]), ElementsAre(0, 0.25, 0.5, 0.75, 1, 1.25));
  EXPECT_THAT(values(by_name["weights/bias"]), ElementsAre(1.5, -2.25));
  EXPECT_EQ(by_name["step"].aval().to_string(), "i64[]");
  EXPECT_EQ(by_name["step"].item<int64_t>(), 1234567890123);
  EXPECT_THAT(by_name["labels"].to_vector<uint8_t>(), ElementsAre(3, 1, 4, 1, 5));
  EXPECT_EQ(by_name["mask"].aval().to_string(), "bool[2,2]");
  EXPECT_THAT(values(by_name["mask"]), ElementsAre(1, 0, 0, 1));
  EXPECT_THAT(values(by_name["half"]), ElementsAre(0.5, -1, 65504));
  EXPECT_THAT(values(by_name["brain"]), ElementsAre(1, -3));
  EXPECT_THAT(by_name["count"].to_vector<uint32_t>(), ElementsAre(4000000000u));
  EXPECT_THAT(by_name["index"].to_vector<int32_t>(), ElementsAre(-7, 0, 7));
  EXPECT_EQ(by_name["empty"].aval().to_string(), "f32[0,4]");
}

TEST(Safetensors, KilnReadsWhatPythonWrites) {
  if (!python_with_numpy()) GTEST_SKIP() << "no /usr/bin/python3 with numpy";
  expect_kiln_reads_what_tool_writes(python_tool(), "safetensors_check.py");
}

TEST(Safetensors, KilnReadsWhatTheSafetensorsPackageWrites) {
  expect_kiln_reads_what_tool_writes(peer_tool(), "safetensors package");
}

}  // namespace
}  // namespace kiln
