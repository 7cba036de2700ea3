// Levenshtein distance, for "did you mean" suggestions (spec keys, subcommands).
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

namespace mpt {

// Insertions, deletions and substitutions that turn `a` into `b`; `limit` when that many or more. Every path to
// the last cell crosses each row, never decreasing, so a row whose smallest entry reaches `limit` ends the search.
inline size_t edit_distance(const std::string& a, const std::string& b, size_t limit = std::string::npos) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    size_t row_min = row[0];
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
      row_min = std::min(row_min, row[j]);
    }
    if (row_min >= limit) return limit;
  }
  return std::min(row[b.size()], limit);
}

}  // namespace mpt
