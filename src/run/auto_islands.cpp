// Automatic FP32 islands (see auto_islands.h).
#include "run/auto_islands.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "run/numerics_report.h"
#include "run/sections.h"

namespace mpt::run {
namespace {

constexpr const char* kAuto = "auto";

double noise_power(const precision::ErrorSums& error) { return error.signal > 0 ? error.noise / error.signal : 0.0; }

// Why layer `i` is damaged in format number `f`, or "".
std::string damage(const NumericsReport& report, size_t f, size_t i, double total_alone_noise) {
  const precision::LayerInFormat& in = report.layers[i].formats[f];
  const double floor = damaged_below_db(report.formats[f]);
  if (in.local.sqnr_db() < floor) return fmt::format("local SQNR {:.1f} dB < {:.0f} dB", in.local.sqnr_db(), floor);
  const double all = report.all[f].logits.sqnr_db();
  const double share = total_alone_noise > 0 ? noise_power(in.alone_logits) / total_alone_noise : 0.0;
  if (all < floor && share >= 0.5)
    return fmt::format("{:.0f}% of the model's error (logits SQNR {:.1f} dB < {:.0f} dB)", 100 * share, all, floor);
  return "";
}

}  // namespace

double damaged_below_db(precision::NumericFormat format) {
  switch (format) {
    case precision::NumericFormat::kBf16: return 40.0;
    case precision::NumericFormat::kFp16: return 59.0;
    case precision::NumericFormat::kFp8:
    case precision::NumericFormat::kMxfp8: return 19.0;
  }
  return 0.0;
}

std::vector<IslandChoice> choose_islands(const NumericsReport& report, size_t f) {
  const std::vector<size_t> order = layers_by_damage(report, f);
  const auto macs = [&](size_t i) { return static_cast<double>(report.layers[i].macs); };
  double total_macs = 0.0, total_alone_noise = 0.0;
  for (size_t i : order) {
    if (report.islands[i]) continue;  // FP32 already: not the format's work
    total_macs += macs(i);
    total_alone_noise += noise_power(report.layers[i].formats[f].alone_logits);
  }
  std::vector<IslandChoice> choices;
  double kept_macs = 0.0;
  for (size_t i : order) {
    if (report.islands[i]) continue;  // already FP32
    std::string why = damage(report, f, i, total_alone_noise);
    if (why.empty()) continue;
    const bool kept = kept_macs + macs(i) <= kAutoIslandBudget * total_macs;
    if (kept) kept_macs += macs(i);
    choices.push_back({report.layers[i].name, std::move(why), kept});
  }
  return choices;
}

void resolve_auto_islands(config::Spec& spec) {
  const std::string key = "precision.fp32_modules";
  std::vector<std::string> patterns = spec.get_string_list(key);  // with the family's islands (resolve_spec)
  const auto found = std::find(patterns.begin(), patterns.end(), kAuto);
  if (found == patterns.end()) return;
  patterns.erase(found);
  spec.set(key, YAML::Node(patterns), "auto");  // the measurement sees the run's other islands as islands
  ExperimentConfig c = read_sections(spec);
  const auto format = precision::training_format(c.precision.mode, c.precision.fp8.recipe);
  if (!format) {
    spec.set(key, YAML::Node(patterns), "auto: an FP32 run, the family's islands");
    return;
  }
  const NumericsReport report = measure_numerics(c, {kAutoIslandBatches, {*format}, /*alone=*/true},
                                                 torch::Device(c.device.type == "cuda" ? torch::kCUDA : torch::kCPU));
  std::string origin = fmt::format("auto ({}, {} batches):", precision::format_name(*format), report.batches);
  std::string separator = " ";
  for (const IslandChoice& choice : choose_islands(report, 0)) {
    if (choice.kept) patterns.push_back(choice.layer);
    origin += separator +
              fmt::format("{} {} ({})", choice.kept ? "kept" : "over budget, not kept:", choice.layer, choice.reason);
    separator = "; ";
  }
  if (separator == " ") origin += fmt::format(" no layer below {:.0f} dB", damaged_below_db(*format));
  spec.set(key, YAML::Node(patterns), origin);
}

}  // namespace mpt::run
