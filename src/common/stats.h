// Order statistics over timings (step times, batch times), shared by training summaries and benchmarks.
#pragma once

#include <algorithm>
#include <vector>

namespace mpt {

// The q-quantile (0..1) by nearest rank; 0 for no values.
inline double percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0.0;
  const size_t index =
      std::min(values.size() - 1, static_cast<size_t>(q * static_cast<double>(values.size() - 1) + 0.5));
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(index), values.end());
  return values[index];
}

}  // namespace mpt
