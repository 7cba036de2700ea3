// The curve measures' definitions, on synthetic curves whose answers are known.
#include <catch2/catch.hpp>

#include <cmath>

#include "tools/compare/curves.h"

using namespace mpt::compare;

TEST_CASE("roughness is zero on smooth curves and linear in the jitter around a trend", "[fast][compare]") {
  std::vector<double> line, jitter_1pct, jitter_2pct;
  for (int i = 0; i < 200; ++i) {
    line.push_back(2.0 - 0.005 * i);
    const double sign = i % 2 == 0 ? 1.0 : -1.0;
    jitter_1pct.push_back(1.0 + 0.01 * sign);
    jitter_2pct.push_back(1.0 + 0.02 * sign);
  }
  CHECK(roughness(line) == Approx(0.0).margin(1e-12));
  // Alternating +-1% around 1: ~1% jitter (the quadratic fit soaks up a little of it).
  CHECK(roughness(jitter_1pct) > 0.008);
  CHECK(roughness(jitter_1pct) < 0.0101);
  CHECK(roughness(jitter_2pct) / roughness(jitter_1pct) == Approx(2.0));
  // A smooth decay, however steep, is not rough.
  std::vector<double> decay;
  for (int i = 0; i < 200; ++i) decay.push_back(2.3 * std::exp(-i / 30.0) + 0.3);
  CHECK(roughness(decay) < 0.1 * roughness(jitter_1pct));
  CHECK(roughness({1.0, 2.0}) == 0.0);  // too short to tell
}

TEST_CASE("trailing and centered means, first crossing, elapsed time, mean and stddev", "[fast][compare]") {
  CHECK(trailing_mean({1, 2, 3, 4}, 2) == std::vector<double>{1.0, 1.5, 2.5, 3.5});
  CHECK(trailing_mean({1, 2, 3}, 0) == std::vector<double>{1, 2, 3});
  std::vector<double> parabola;
  for (int i = 0; i < 30; ++i) parabola.push_back(0.5 * i * i - 3.0 * i + 7.0);
  const std::vector<double> trend = local_quadratic_trend(parabola, 5);
  for (size_t i = 0; i < parabola.size(); ++i) CHECK(trend[i] == Approx(parabola[i]));
  CHECK(local_quadratic_trend({1, 5, 1}, 5) == std::vector<double>{1, 5, 1});  // 3 points: an exact fit
  CHECK(convergence_window(10) == 3);
  CHECK(convergence_window(60) == 3);
  CHECK(convergence_window(400) == 20);
  CHECK(first_at_or_below({3, 2, 1.5, 1.0}, 1.5) == std::optional<size_t>(2));
  CHECK_FALSE(first_at_or_below({3, 2}, 1.0).has_value());
  CHECK_FALSE(first_at_or_below({NAN, NAN}, 1.0).has_value());
  // Windows ending at steps 10 and 20 of batch 10: 100 samples at 100/s, then 100 at 200/s.
  CHECK(elapsed_seconds({10, 20}, {100.0, 200.0}, 10) == std::vector<double>{1.0, 1.5});
  CHECK(mean({1, 2, 3, 4}) == 2.5);
  CHECK(sample_stddev({1, 2, 3, 4}) == Approx(1.2909944));
  CHECK(sample_stddev({7}) == 0.0);
}
