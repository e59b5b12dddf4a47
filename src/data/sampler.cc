// The Feistel permutation, shard ranges and iterator state of sampler.h.
#include "data/sampler.h"

#include <bit>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kiln/error.h"

namespace kiln::data {
namespace {

// SplitMix64's output function: a fast 64-bit mixer whose every output bit depends on
// every input bit, used to derive round keys and as the round function.
uint64_t mix64(uint64_t value) {
  value += 0x9E3779B97F4A7C15ULL;
  value = (value ^ (value >> 30)) * 0xBF58476D1CE4E5B9ULL;
  value = (value ^ (value >> 27)) * 0x94D049BB133111EBULL;
  return value ^ (value >> 31);
}

}  // namespace

EpochPermutation::EpochPermutation(int64_t size, uint64_t seed, uint64_t epoch) : size_(size) {
  if (size < 0) {
    fail(kUnknownSite, fmt::format("EpochPermutation: size must be >= 0, got {}", size));
  }
  // The Feistel network needs two halves of at least one bit each.
  int bits = size <= 4 ? 2 : std::bit_width(static_cast<uint64_t>(size - 1));
  bits += bits % 2;
  half_bits_ = bits / 2;
  half_mask_ = (uint64_t{1} << half_bits_) - 1;
  uint64_t base = mix64(mix64(seed) ^ mix64(epoch ^ 0x5851F42D4C957F2DULL));
  for (int round = 0; round < kRounds; ++round) {
    round_keys_[static_cast<size_t>(round)] = mix64(base + static_cast<uint64_t>(round));
  }
}

uint64_t EpochPermutation::encrypt(uint64_t value) const {
  uint64_t left = value >> half_bits_;
  uint64_t right = value & half_mask_;
  for (uint64_t key : round_keys_) {
    uint64_t next = left ^ (mix64(right ^ key) & half_mask_);
    left = right;
    right = next;
  }
  return (left << half_bits_) | right;
}

int64_t EpochPermutation::operator()(int64_t position) const {
  if (position < 0 || position >= size_) {
    fail(kUnknownSite,
         fmt::format("EpochPermutation: position {} is outside [0, {})", position, size_));
  }
  // The network permutes [0, 2^bits); following the cycle from `position` must come back
  // into [0, size) because the cycle holds `position` itself.
  auto value = static_cast<uint64_t>(position);
  do {
    value = encrypt(value);
  } while (value >= static_cast<uint64_t>(size_));
  return static_cast<int64_t>(value);
}

PositionRange shard_range(int64_t size, const ShardOptions& shard) {
  if (shard.count < 1 || shard.index < 0 || shard.index >= shard.count) {
    fail(kUnknownSite,
         fmt::format("shard index {} of {}: expected a count >= 1 and 0 <= index < count",
                     shard.index, shard.count));
  }
  if (size < 0) fail(kUnknownSite, fmt::format("shard_range: size must be >= 0, got {}", size));
  int64_t per_shard = size / shard.count;
  int64_t remainder = shard.drop_remainder ? 0 : size % shard.count;
  int64_t begin = per_shard * shard.index + std::min(shard.index, remainder);
  int64_t end = begin + per_shard + (shard.index < remainder ? 1 : 0);
  return PositionRange{begin, end};
}

nlohmann::json to_json(const IteratorState& state) {
  return {{"epoch", state.epoch}, {"position", state.position}};
}

IteratorState iterator_state_from_json(const nlohmann::json& json) {
  auto field = [&](const char* name) -> int64_t {
    if (!json.is_object() || !json.contains(name)) {
      fail(kUnknownSite, fmt::format("iterator state {}: missing field '{}' (expected "
                                     "{{\"epoch\": E, \"position\": P}})",
                                     json.dump(), name));
    }
    const nlohmann::json& value = json.at(name);
    if (!value.is_number_integer() || value.get<int64_t>() < 0) {
      fail(kUnknownSite, fmt::format("iterator state {}: '{}' must be an integer >= 0, got {}",
                                     json.dump(), name, value.dump()));
    }
    return value.get<int64_t>();
  };
  return IteratorState{field("epoch"), field("position")};
}

Sampler::Sampler(const SamplerOptions& options)
    : options_(options), range_(shard_range(options.num_records, options.shard)) {}

int64_t Sampler::global_index(int64_t epoch, int64_t position) const {
  return epoch * options_.num_records + range_.begin + position;
}

int64_t Sampler::record(int64_t epoch, int64_t position) const {
  int64_t out = 0;
  records(epoch, position, 1, &out);
  return out;
}

void Sampler::records(int64_t epoch, int64_t begin, int64_t count, int64_t* out) const {
  if (epoch < 0 || begin < 0 || count < 0 || begin + count > range_.size()) {
    fail(kUnknownSite,
         fmt::format("Sampler: positions [{}, {}) of epoch {} are outside this shard's [0, {})",
                     begin, begin + count, epoch, range_.size()));
  }
  if (!options_.shuffle) {
    for (int64_t i = 0; i < count; ++i) out[i] = range_.begin + begin + i;
    return;
  }
  EpochPermutation order(options_.num_records, options_.seed, static_cast<uint64_t>(epoch));
  for (int64_t i = 0; i < count; ++i) out[i] = order(range_.begin + begin + i);
}

}  // namespace kiln::data
