// The rule precision.fp32_modules: [auto] follows (run/auto_islands.h) on made-up measurements: damaged layers kept
// most damaged first within the budget, islands left alone, the model-level share rule.
#include <catch2/catch.hpp>

#include <cmath>

#include "run/auto_islands.h"

using mpt::run::NumericsReport;

namespace {

// A layer of `in` x `out` whose output carries `local_db` of local SQNR and `alone_db` of logits SQNR alone in FP8.
void add_layer(NumericsReport& report, const std::string& name, int64_t in, int64_t out, double local_db,
               double alone_db, bool island = false) {
  mpt::precision::LayerNumerics layer{name, "Linear", in, out, /*macs=*/in * out};
  layer.formats.resize(1);
  layer.formats[0].local = {1.0, std::pow(10.0, -local_db / 10), 1};
  layer.formats[0].alone_logits = {1.0, std::pow(10.0, -alone_db / 10), 1};
  report.layers.push_back(layer);
  report.islands.push_back(island);
}

NumericsReport fp8_report(double model_db) {
  NumericsReport report;
  report.formats = {mpt::precision::NumericFormat::kFp8};
  report.all.resize(1);
  report.all[0].logits = {1.0, std::pow(10.0, -model_db / 10), 1};
  return report;
}

}  // namespace

TEST_CASE("auto keeps damaged layers, most damaged first, while they stay within a quarter of the FP8 work",
          "[fast][numerics]") {
  NumericsReport report = fp8_report(25.0);
  add_layer(report, "big", 1024, 1024, 28.0, 30.0);
  add_layer(report, "small_bad", 128, 128, 2.0, 20.0);
  add_layer(report, "medium_bad", 512, 512, 10.0, 25.0);
  add_layer(report, "huge_bad", 1024, 1024, 5.0, 22.0);
  add_layer(report, "head", 128, 128, 1.0, 10.0, /*island=*/true);
  const auto choices = mpt::run::choose_islands(report, 0);
  REQUIRE(choices.size() == 3);
  CHECK(choices[0].layer == "small_bad");
  CHECK(choices[0].kept);
  CHECK(choices[0].reason == "local SQNR 2.0 dB < 19 dB");
  CHECK(choices[1].layer == "huge_bad");
  CHECK_FALSE(choices[1].kept);  // 1M of 2.4M multiply-adds would pass the quarter
  CHECK(choices[2].layer == "medium_bad");
  CHECK(choices[2].kept);
}

TEST_CASE("auto keeps the layer carrying most of the model's error only when the model itself is damaged",
          "[fast][numerics]") {
  NumericsReport damaged = fp8_report(15.0);
  add_layer(damaged, "a", 1024, 1024, 27.0, 30.0);
  add_layer(damaged, "b", 1024, 1024, 27.0, 30.0);
  add_layer(damaged, "c", 1024, 1024, 27.0, 30.0);
  add_layer(damaged, "d", 1024, 1024, 27.0, 30.0);
  add_layer(damaged, "culprit", 512, 1024, 25.0, 16.0);
  const auto choices = mpt::run::choose_islands(damaged, 0);
  REQUIRE(choices.size() == 1);
  CHECK(choices[0].layer == "culprit");
  CHECK_THAT(choices[0].reason, Catch::StartsWith("86% of the model's error (logits SQNR 15.0 dB < 19 dB)"));
  NumericsReport healthy = damaged;
  healthy.all[0].logits = {1.0, 1e-3, 1};  // 30 dB
  CHECK(mpt::run::choose_islands(healthy, 0).empty());
}
