// Edit distance for the did-you-mean suggestions of user-facing errors (unknown tree
// keys, IR primitive names, config keys). One copy, shared by every layer that suggests.
#pragma once

#include <cstddef>
#include <span>
#include <string_view>

namespace kiln {

// The number of single-character insertions, deletions, substitutions and swaps of two
// neighbours turning `a` into `b` (optimal string alignment), ignoring ASCII case: a
// swapped pair or a key typed in the wrong case is a likely typo too.
size_t edit_distance(std::string_view a, std::string_view b);

// The candidate closest to `word` if it is a likely typo (up to a third of the word may
// differ, one edit for short words), else empty. Ties go to the first candidate.
std::string_view closest_match(std::string_view word, std::span<const std::string_view> candidates);

}  // namespace kiln
