// The edit distance behind every did-you-mean (src/base/edit_distance.h): insertions,
// deletions, substitutions and swapped neighbours each cost one; case is ignored.
#include "base/edit_distance.h"

#include <gtest/gtest.h>

namespace kiln {
namespace {

TEST(EditDistance, CountsSingleCharacterEdits) {
  EXPECT_EQ(edit_distance("", ""), 0u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(edit_distance("abc", ""), 3u);
  EXPECT_EQ(edit_distance("lr", "lr"), 0u);
  EXPECT_EQ(edit_distance("lrr", "lr"), 1u);      // insertion
  EXPECT_EQ(edit_distance("dens", "dense"), 1u);  // deletion
  EXPECT_EQ(edit_distance("adan", "adam"), 1u);   // substitution
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
}

TEST(EditDistance, SwappedNeighboursCostOne) {
  EXPECT_EQ(edit_distance("trian", "train"), 1u);
  EXPECT_EQ(edit_distance("ab", "ba"), 1u);
  EXPECT_EQ(edit_distance("abc", "ca"), 3u);  // optimal string alignment: no edit twice
}

TEST(EditDistance, IgnoresCaseAndIsSymmetric) {
  EXPECT_EQ(edit_distance("Batch_Size", "batch_size"), 0u);
  EXPECT_EQ(edit_distance("weights", "kernel"), edit_distance("kernel", "weights"));
}

}  // namespace
}  // namespace kiln
