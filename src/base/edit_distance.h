// Edit distance for the did-you-mean suggestions of user-facing errors (unknown tree
// keys, IR primitive names, config keys). One copy, shared by every layer that suggests.
#pragma once

#include <cstddef>
#include <string_view>

namespace kiln {

// The number of single-character insertions, deletions, substitutions and swaps of two
// neighbours turning `a` into `b` (optimal string alignment), ignoring ASCII case: a
// swapped pair or a key typed in the wrong case is a likely typo too.
size_t edit_distance(std::string_view a, std::string_view b);

}  // namespace kiln
