// FP8 casts and the scaled GEMM against the formats' definitions: every E4M3 and E5M2 value decoded from its bits
// here, rounding to the nearest value (ties to even), saturation at the formats' maxima, and a GEMM's error within
// what the formats allow.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "ops/float8.h"

using mpt::ops::Float8;

namespace {

// The finite values of an FP8 format from its bit layout: E4M3 (bias 7, no infinities; only S.1111.111 is NaN)
// or E5M2 (bias 15, IEEE-like: exponent 31 is Inf/NaN). Sorted, with the code's mantissa parity.
struct Value {
  double value;
  bool even;  // last mantissa bit 0: where a tie rounds to
};
std::vector<Value> finite_values(Float8 format) {
  const bool e4m3 = format == Float8::kE4M3;
  const int mantissa_bits = e4m3 ? 3 : 2, bias = e4m3 ? 7 : 15, max_exponent = e4m3 ? 15 : 31;
  std::vector<Value> values;
  for (int code = 0; code < 128; ++code) {
    const int exponent = code >> mantissa_bits, mantissa = code & ((1 << mantissa_bits) - 1);
    if (e4m3 && exponent == max_exponent && mantissa == (1 << mantissa_bits) - 1) continue;  // NaN
    if (!e4m3 && exponent == max_exponent) continue;                                         // Inf, NaN
    const double fraction = static_cast<double>(mantissa) / (1 << mantissa_bits);
    const double magnitude = exponent == 0 ? std::ldexp(fraction, 1 - bias) : std::ldexp(1 + fraction, exponent - bias);
    values.push_back({magnitude, mantissa % 2 == 0});
    if (code != 0) values.push_back({-magnitude, mantissa % 2 == 0});
  }
  std::sort(values.begin(), values.end(), [](const Value& a, const Value& b) { return a.value < b.value; });
  return values;
}

// The reference rounding: the nearest finite value, a tie to the even code, beyond the range the max.
double round_reference(double x, const std::vector<Value>& values) {
  if (x >= values.back().value) return values.back().value;
  if (x <= values.front().value) return values.front().value;
  const auto above =
      std::lower_bound(values.begin(), values.end(), x, [](const Value& v, double t) { return v.value < t; });
  if (above->value == x) return x;
  const auto below = above - 1;
  const double down = x - below->value, up = above->value - x;
  if (down < up) return below->value;
  if (up < down) return above->value;
  return below->even ? below->value : above->value;
}

torch::Tensor one() { return torch::ones({}, torch::kFloat); }

}  // namespace

TEST_CASE("the FP8 formats: E4M3 tops out at 448 with no infinities, E5M2 at 57344", "[fast][ops][fp8]") {
  const auto e4m3 = finite_values(Float8::kE4M3), e5m2 = finite_values(Float8::kE5M2);
  CHECK(e4m3.back().value == 448.0);
  CHECK(mpt::ops::float8_format(Float8::kE4M3).max == 448.0);
  CHECK(e5m2.back().value == 57344.0);
  CHECK(mpt::ops::float8_format(Float8::kE5M2).max == 57344.0);
  CHECK(e4m3.size() == 253);  // 256 codes less 2 NaNs, +0 and -0 as one value
  CHECK(e5m2.size() == 247);  // 256 less 6 NaNs and 2 infinities, one zero
}

TEST_CASE("every FP8 value survives the cast, and any other rounds to the nearest, ties to even", "[fast][ops][fp8]") {
  for (Float8 format : {Float8::kE4M3, Float8::kE5M2}) {
    INFO(mpt::ops::float8_format(format).name);
    const auto values = finite_values(format);
    std::vector<float> exact;
    for (const Value& v : values) exact.push_back(static_cast<float>(v.value));
    const torch::Tensor x = torch::tensor(exact);
    CHECK(torch::equal(mpt::ops::to_float8(x, one(), format).to(torch::kFloat), x));

    // Midpoints (the ties), points just either side of them, and random values across the range and beyond it.
    std::vector<float> probes;
    for (size_t i = 0; i + 1 < values.size(); ++i) {
      const double mid = (values[i].value + values[i + 1].value) / 2;
      probes.push_back(static_cast<float>(mid));
      probes.push_back(std::nextafter(static_cast<float>(mid), 1e30f));
      probes.push_back(std::nextafter(static_cast<float>(mid), -1e30f));
    }
    std::mt19937 rng(7);
    std::normal_distribution<float> wide(0.0f, 4.0f);
    for (int i = 0; i < 4000; ++i) probes.push_back(std::ldexp(wide(rng), static_cast<int>(rng() % 40) - 20));
    const torch::Tensor p = torch::tensor(probes);
    const torch::Tensor rounded = mpt::ops::to_float8(p, one(), format).to(torch::kFloat);
    int mismatches = 0;
    for (size_t i = 0; i < probes.size(); ++i) {
      const double want = round_reference(probes[i], values), got = rounded[static_cast<int64_t>(i)].item<float>();
      if (want != got && mismatches++ < 5) FAIL_CHECK(probes[i] << " rounded to " << got << ", expected " << want);
    }
    CHECK(mismatches == 0);
  }
}

TEST_CASE(
    "the cast saturates beyond the range instead of making NaN or Inf, counts what it saturates, and keeps "
    "NaN",
    "[fast][ops][fp8]") {
  const torch::Tensor x = torch::tensor({1e6f, -1e6f, 500.0f, 3.0f, std::nanf("")});
  const torch::Tensor e4m3 = mpt::ops::to_float8(x, one(), Float8::kE4M3).to(torch::kFloat);
  CHECK(e4m3[0].item<float>() == 448.0f);
  CHECK(e4m3[1].item<float>() == -448.0f);
  CHECK(e4m3[2].item<float>() == 448.0f);
  CHECK(std::isnan(e4m3[4].item<float>()));
  CHECK(mpt::ops::count_saturated(x, one(), Float8::kE4M3).item<int64_t>() == 3);
  const torch::Tensor e5m2 = mpt::ops::to_float8(x * 1000, one(), Float8::kE5M2).to(torch::kFloat);
  CHECK(e5m2[0].item<float>() == 57344.0f);
  CHECK(e5m2[3].item<float>() == 3072.0f);  // 3000 rounds to 3072 = 1.5 x 2^11
  // The scale multiplies before rounding: 3 x 0.25 = 0.75 is exact in both formats.
  CHECK(mpt::ops::to_float8(torch::tensor({3.0f}), torch::full({}, 0.25f), Float8::kE4M3)
            .to(torch::kFloat)
            .item<float>() == 0.75f);
}

TEST_CASE("an FP8 GEMM's error against FP32 stays within the formats' rounding bound", "[fast][ops][fp8]") {
  torch::manual_seed(3);
  const torch::Tensor a = torch::randn({64, 96}), b = torch::randn({48, 96});
  for (Float8 a_format : {Float8::kE4M3, Float8::kE5M2}) {
    const auto& f = mpt::ops::float8_format(a_format);
    // Current scaling: each operand's amax maps to its format's max.
    const torch::Tensor a_scale = f.max / a.abs().max(), b_scale = 448.0 / b.abs().max();
    const torch::Tensor a8 = mpt::ops::to_float8(a, a_scale, a_format);
    const torch::Tensor b8 = mpt::ops::to_float8(b, b_scale, Float8::kE4M3);
    const torch::Tensor c = mpt::ops::scaled_gemm(a8, a_scale, b8, b_scale, torch::kFloat);
    const torch::Tensor exact = torch::mm(a.to(torch::kDouble), b.to(torch::kDouble).t());
    // Each operand's relative rounding error is at most half an ulp: 2^-4 (E4M3) or 2^-3 (E5M2), above the
    // subnormals, which these scaled values stay clear of in all but a few elements (covered by the FP32 term).
    const double u_a = a_format == Float8::kE4M3 ? 1.0 / 16 : 1.0 / 8, u_b = 1.0 / 16;
    const torch::Tensor bound =
        (u_a + u_b + u_a * u_b) * torch::mm(a.abs().to(torch::kDouble), b.abs().to(torch::kDouble).t()) + 1e-2;
    const torch::Tensor error = (c.to(torch::kDouble) - exact).abs();
    INFO(f.name << ": worst error / bound " << (error / bound).max().item<double>());
    CHECK((error <= bound).all().item<bool>());
    // and FP8 is not FP32: the error is there.
    CHECK(error.max().item<double>() > 1e-3);
  }
}
