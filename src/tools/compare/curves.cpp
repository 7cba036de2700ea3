// Curve measures; see curves.h for the definitions.
#include "tools/compare/curves.h"

#include <algorithm>
#include <cmath>

namespace mpt::compare {

std::vector<double> local_quadratic_trend(const std::vector<double>& values, size_t half_width) {
  std::vector<double> out(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    const size_t half = std::min({half_width, i, values.size() - 1 - i});
    if (half == 0) {
      out[i] = values[i];
      continue;
    }
    // Savitzky-Golay weights of the centre point of a quadratic fit over 2m+1 points.
    const double m = static_cast<double>(half);
    const double denominator = (2 * m + 3) * (2 * m + 1) * (2 * m - 1);
    double sum = 0.0;
    for (int64_t j = -static_cast<int64_t>(half); j <= static_cast<int64_t>(half); ++j)
      sum += 3.0 * (3 * m * m + 3 * m - 1 - 5.0 * static_cast<double>(j * j)) / denominator * values[i + j];
    out[i] = sum;
  }
  return out;
}

std::vector<double> trailing_mean(const std::vector<double>& values, size_t window) {
  std::vector<double> out(values.size());
  window = std::max<size_t>(window, 1);
  double sum = 0.0;
  for (size_t i = 0; i < values.size(); ++i) {
    sum += values[i];
    if (i >= window) sum -= values[i - window];
    out[i] = sum / static_cast<double>(std::min(i + 1, window));
  }
  return out;
}

double roughness(const std::vector<double>& values) {
  if (values.size() < 3) return 0.0;
  const std::vector<double> trend = local_quadratic_trend(values, kRoughnessHalfWidth);
  double squared = 0.0, magnitude = 0.0;
  const size_t first = values.size() / 10;
  for (size_t i = first; i < values.size(); ++i) {
    squared += (values[i] - trend[i]) * (values[i] - trend[i]);
    magnitude += std::abs(values[i]);
  }
  const double n = static_cast<double>(values.size() - first);
  return magnitude > 0.0 ? std::sqrt(squared / n) / (magnitude / n) : 0.0;
}

size_t convergence_window(size_t points) { return std::max<size_t>(3, points / 20); }

std::optional<size_t> first_at_or_below(const std::vector<double>& values, double target) {
  for (size_t i = 0; i < values.size(); ++i)
    if (values[i] <= target) return i;
  return std::nullopt;
}

std::vector<double> elapsed_seconds(const std::vector<int64_t>& steps, const std::vector<double>& samples_per_sec,
                                    int64_t global_batch) {
  std::vector<double> out(steps.size());
  double elapsed = 0.0;
  int64_t previous = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    const double samples = static_cast<double>((steps[i] - previous) * global_batch);
    if (samples_per_sec[i] > 0.0 && std::isfinite(samples_per_sec[i])) elapsed += samples / samples_per_sec[i];
    out[i] = elapsed;
    previous = steps[i];
  }
  return out;
}

double mean(const std::vector<double>& values) {
  if (values.empty()) return NAN;
  double sum = 0.0;
  for (double v : values) sum += v;
  return sum / static_cast<double>(values.size());
}

double sample_stddev(const std::vector<double>& values) {
  if (values.size() < 2) return 0.0;
  const double m = mean(values);
  double squared = 0.0;
  for (double v : values) squared += (v - m) * (v - m);
  return std::sqrt(squared / static_cast<double>(values.size() - 1));
}

}  // namespace mpt::compare
