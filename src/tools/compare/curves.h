// The curve measures ab-compare reports, as plain functions of logged values so their definitions can be
// tested on synthetic curves and written out in the report.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace mpt::compare {

// The local quadratic trend: at each point, the least-squares parabola through `half_width` points either side
// (a Savitzky-Golay filter), the window shrinking symmetrically near the ends. Any parabola is its own trend.
std::vector<double> local_quadratic_trend(const std::vector<double>& values, size_t half_width);

// Mean of the last `window` points up to each point (shorter at the start).
std::vector<double> trailing_mean(const std::vector<double>& values, size_t window);

// Loss-curve roughness: the RMS of the curve's residual from its local quadratic trend (5 points either side),
// divided by the mean |value|, over the curve after its first 10% of points (where a loss falls fastest).
// 0 for any smooth curve; ~0.01 means the loss jitters ~1% around its trend. Trends do not count, so two runs
// that learn at different speeds still compare on noise alone.
constexpr size_t kRoughnessHalfWidth = 5;
double roughness(const std::vector<double>& values);

// The smoothing window for convergence: 5% of the logged points, at least 3, so that a run logged sparsely (a few
// dozen points) is not judged by one point's noise: one low point of A would set a target no run reaches again.
size_t convergence_window(size_t points);

// The first index whose value is <= target, if any.
std::optional<size_t> first_at_or_below(const std::vector<double>& values, double target);

// Training seconds elapsed at each logged step, from the samples/s of each logging window:
// the window ending at step s covers (s - previous s) steps of `global_batch` samples.
std::vector<double> elapsed_seconds(const std::vector<int64_t>& steps, const std::vector<double>& samples_per_sec,
                                    int64_t global_batch);

// Mean and sample standard deviation (0 for fewer than two values).
double mean(const std::vector<double>& values);
double sample_stddev(const std::vector<double>& values);

}  // namespace mpt::compare
