// The sampler: which record a training position reads. Every epoch's order is a
// permutation that is a pure function of (seed, epoch), computed per position by a keyed
// Feistel network (O(1) memory, no materialised order), so a position can be resumed,
// sharded and recomputed anywhere. Shards split each epoch's positions into contiguous
// ranges, so the shards of an epoch together read every record exactly once.
#pragma once

#include <array>
#include <cstdint>

#include <nlohmann/json_fwd.hpp>

namespace kiln::data {

// A bijection of [0, size) chosen by (seed, epoch). A balanced Feistel network permutes
// [0, 2^bits) (bits: the next even power of two >= size, so at most 4 * size values);
// values >= size are encrypted again until they land inside ("cycle walking"), which keeps
// it a bijection for every size, including 2^k + 1.
//   EpochPermutation order(60000, /*seed=*/0, /*epoch=*/2);
//   int64_t record = order(17);   // the record read at position 17 of epoch 2
class EpochPermutation {
 public:
  EpochPermutation(int64_t size, uint64_t seed, uint64_t epoch);
  int64_t size() const { return size_; }
  // `position` in [0, size); anything else is a kiln::Error.
  int64_t operator()(int64_t position) const;

 private:
  static constexpr int kRounds = 6;
  uint64_t encrypt(uint64_t value) const;

  int64_t size_;
  int half_bits_ = 1;
  uint64_t half_mask_ = 1;
  std::array<uint64_t, kRounds> round_keys_{};
};

// Shard `index` of `count` (processes x devices, flattened), as in Grain's even_split: each
// shard gets a contiguous range of an epoch's positions; without drop_remainder the first
// `size % count` shards get one position more, with it every shard gets size / count and
// the rest of the epoch is not read.
struct ShardOptions {
  int64_t index = 0;
  int64_t count = 1;
  bool drop_remainder = false;
};

struct PositionRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};

// The positions of [0, size) that shard `shard` reads; bad options are a kiln::Error.
PositionRange shard_range(int64_t size, const ShardOptions& shard);

// Where an iterator stands: the epoch (0-based) and the next position in it (within the
// shard). Plain JSON, {"epoch": 1, "position": 512}, so that a savepoint can store it.
struct IteratorState {
  int64_t epoch = 0;
  int64_t position = 0;
  friend bool operator==(const IteratorState&, const IteratorState&) = default;
};
nlohmann::json to_json(const IteratorState& state);
// Errors name the missing or mistyped field.
IteratorState iterator_state_from_json(const nlohmann::json& json);

struct SamplerOptions {
  int64_t num_records = 0;
  uint64_t seed = 0;
  bool shuffle = true;  // false: every epoch reads the records in file order
  ShardOptions shard;
};

// Global position -> record for one shard: position p of epoch e reads
// permutation(seed, e)(shard.begin + p).
class Sampler {
 public:
  explicit Sampler(const SamplerOptions& options);
  // Positions this shard reads per epoch.
  int64_t epoch_length() const { return range_.size(); }
  int64_t num_records() const { return options_.num_records; }
  const SamplerOptions& options() const { return options_; }
  // The global index of (epoch, position) over the whole run, the same on every shard for
  // the same record slot: epoch * num_records + shard.begin + position. Per-example
  // randomness is keyed by it, so it depends neither on workers nor on batch size.
  int64_t global_index(int64_t epoch, int64_t position) const;
  // The record at `position` (within this shard) of `epoch`.
  int64_t record(int64_t epoch, int64_t position) const;
  // The same for a whole epoch's consecutive positions, reusing one permutation.
  void records(int64_t epoch, int64_t begin, int64_t count, int64_t* out) const;

 private:
  SamplerOptions options_;
  PositionRange range_;
};

}  // namespace kiln::data
