// Edit distance (base/edit_distance.h), one row of the table at a time.
#include "base/edit_distance.h"

#include <algorithm>
#include <cctype>
#include <vector>

namespace kiln {

size_t edit_distance(std::string_view a, std::string_view b) {
  auto same = [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) ==
           std::tolower(static_cast<unsigned char>(y));
  };
  // Rows i-2, i-1 and i of the table; a swap of two neighbours looks two rows back.
  std::vector<size_t> before(b.size() + 1), previous(b.size() + 1), row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) previous[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t substitute = previous[j - 1] + (same(a[i - 1], b[j - 1]) ? 0 : 1);
      row[j] = std::min({previous[j] + 1, row[j - 1] + 1, substitute});
      if (i > 1 && j > 1 && same(a[i - 1], b[j - 2]) && same(a[i - 2], b[j - 1])) {
        row[j] = std::min(row[j], before[j - 2] + 1);
      }
    }
    std::swap(before, previous);
    std::swap(previous, row);
  }
  return previous[b.size()];
}

std::string_view closest_match(std::string_view word,
                               std::span<const std::string_view> candidates) {
  std::string_view best;
  size_t best_distance = std::max<size_t>(1, word.size() / 3) + 1;
  for (std::string_view candidate : candidates) {
    size_t distance = edit_distance(word, candidate);
    if (distance < best_distance) {
      best = candidate;
      best_distance = distance;
    }
  }
  return best;
}

}  // namespace kiln
