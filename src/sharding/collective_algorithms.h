// How each collective moves data within one group, by algorithm. Every reduction combines
// the members' values elementwise in one fixed order, a pairwise tree over the group index
// (the left part the largest power of two below the count: ((x0 + x1) + (x2 + x3)) for 4,
// (x0 + x1) + x2 for 3), whichever algorithm runs and whatever devices hold the values: so
// the three algorithms give the same bits, and a sum over 4 devices of partial sums over
// pairs of chunks equals one over 2 devices or 1 (what makes training bit-identical across
// power-of-two device counts).
//
//   reference  every value to member 0, combined there, the result sent to every member:
//              the plain meaning, the others' test oracle (KILN_COLLECTIVES=ref).
//   tree       reduce up the pairwise tree, broadcast down it: log2(n) steps, each device
//              sends at most log2(n) copies of x; fewest steps (kAuto's all-reduce).
//   ring       reduce-scatter (member j receives segment j of every value and combines the
//              n segments in tree order) then a ring all-gather of the combined segments:
//              each device sends and receives 2 (n-1)/n of x's bytes, the ring's optimum.
// all_gather runs as a ring (n - 1 steps of one block), psum_scatter as the ring's
// reduce-scatter phase, all_to_all and ppermute as direct sends; under `reference` they all
// go through member 0.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kiln/sharding.h"
#include "sharding/collective_group.h"

namespace kiln::spmd {

enum class Reduction { kSum, kMax };

// The parts, all on one device, combined in pairwise-tree order.
Array tree_combine(std::span<const Array> parts, Reduction reduction, CallSite site);

// Each member's result, committed to its device.
std::vector<Array> all_reduce(const Group& group, Reduction reduction,
                              CollectiveAlgorithm algorithm);
std::vector<Array> reduce_scatter(const Group& group, int64_t dimension, bool tiled,
                                  CollectiveAlgorithm algorithm);
std::vector<Array> all_gather(const Group& group, int64_t dimension, bool tiled,
                              CollectiveAlgorithm algorithm);
std::vector<Array> all_to_all(const Group& group, int64_t split_dimension, int64_t concat_dimension,
                              CollectiveAlgorithm algorithm);
// `pairs` of group indices (source, destination); a member no pair reaches gets zeros.
std::vector<Array> permute(const Group& group, const Dims& pairs, CollectiveAlgorithm algorithm);

}  // namespace kiln::spmd
