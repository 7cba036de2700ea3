// precision.fp32_modules: [auto, ...]: the FP32 islands chosen from a measurement (run/numerics.h) of the run's own
// model and data in the format its GEMMs train in, made once at resolution so that config.yaml, train.log and
// summary.json carry the chosen list with a reason per layer and a rerun resolves the same. docs/numerics.md.
#pragma once

#include <string>
#include <vector>

#include "config/spec.h"
#include "run/numerics.h"

namespace mpt::run {

inline constexpr int64_t kAutoIslandBatches = 2;
// The share of the format's GEMM multiply-adds that auto may move back to higher precision.
inline constexpr double kAutoIslandBudget = 0.25;

// A layer's local SQNR below this is damaged: about 10 dB under what rounding to the format's mantissa costs a
// well-ranged GEMM (BF16 50 dB, FP16 69, E4M3 29, MXFP8 25-29).
double damaged_below_db(precision::NumericFormat format);

struct IslandChoice {
  std::string layer;
  std::string reason;  // "local SQNR 3.1 dB < 19 dB", ...
  bool kept = false;   // false: damaged, but keeping it would pass the budget
};

// The layers of `report`'s format number `format` the rule keeps in higher precision, most damaged first: those whose
// local SQNR is below damaged_below_db, or, when the model with every layer in the format is itself below it, the
// layer whose alone error carries at least half of all layers' alone error; kept while the kept layers'
// multiply-adds stay within kAutoIslandBudget of the format's.
std::vector<IslandChoice> choose_islands(const NumericsReport& report, size_t format);

// When precision.fp32_modules holds "auto" (resolve_spec has added the family's islands beside it): measures the
// spec's model in its training format and puts the layers choose_islands keeps in its place, with the reasons as the
// key's origin. A no-op otherwise.
void resolve_auto_islands(config::Spec& spec);

}  // namespace mpt::run
