// Numerics reports (see numerics_report.h).
#include "run/numerics_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "tools/compare/svg_chart.h"

namespace mpt::run {
namespace {

using precision::ErrorSums;
using precision::LayerInFormat;
using precision::RangeStats;

constexpr double kMiB = 1024.0 * 1024.0;

// Sorts NaN (not measured) last.
double order_key(double sqnr) { return std::isnan(sqnr) ? INFINITY : sqnr; }

std::string db(double sqnr) {
  if (std::isnan(sqnr)) return "-";
  if (std::isinf(sqnr)) return sqnr > 0 ? "exact" : "Inf/NaN";
  return fmt::format("{:.1f}", sqnr);
}

std::string number(double value) { return std::isnan(value) ? "-" : fmt::format("{:.2g}", value); }

// The loss change with the layer alone in the format, per batch (NaN when not measured).
double alone_loss_delta(const LayerInFormat& in) {
  return in.alone_logits.tensors ? in.alone_loss_delta / static_cast<double>(in.alone_logits.tensors) : NAN;
}

// "Linear 784x256", "Conv2d 576x64", or the kind of a module that is no GEMM ("LayerNorm", "attention").
std::string label(const precision::LayerNumerics& layer) {
  return layer.in_features ? fmt::format("{} {}x{}", layer.kind, layer.in_features, layer.out_features) : layer.kind;
}

std::string percent(double share) {
  if (share == 0) return "0";
  return share >= 0.01 ? fmt::format("{:.1f}%", 100 * share) : fmt::format("{:.2g}%", 100 * share);
}

nlohmann::ordered_json range_json(const RangeStats& range) {
  return {{"amax", range.amax},
          {"scale", range.scale},
          {"flushed_share", range.share(range.flushed)},
          {"subnormal_share", range.share(range.subnormal)},
          {"saturated_share", range.share(range.saturated)},
          {"values", range.values}};
}

// JSON has no infinities: an exact result reads sqnr_db null with exact true, an Inf/NaN one null with nonfinite true.
nlohmann::ordered_json error_json(const ErrorSums& error) {
  nlohmann::ordered_json json = {{"sqnr_db", error.sqnr_db()}, {"relative_error", error.relative()}};
  if (error.signal > 0 && error.noise == 0) json["exact"] = true;
  if (std::isinf(error.noise)) json["nonfinite"] = true;
  return json;
}

nlohmann::ordered_json layer_format_json(const NumericsReport& report, size_t f, const LayerInFormat& in, int rank) {
  if (!in.why_not.empty()) return {{"eligible", false}, {"why_not", in.why_not}};
  nlohmann::ordered_json json = {
      {"eligible", true},
      {"rank", rank},
      {"local", error_json(in.local)},
      {"alone", {{"logits", error_json(in.alone_logits)}, {"loss_delta", alone_loss_delta(in)}}},
      {"gradients", {{"weight", error_json(in.weight_grad)}, {"input", error_json(in.input_grad)}}},
      {"input", range_json(in.input)},
      {"weight", range_json(in.weight)},
      {"grad_output", range_json(in.grad_output)}};
  if (report.formats[f] == precision::NumericFormat::kFp16) {
    const precision::LossScaleWindow window = precision::fp16_loss_scale_window(in.grad_output);
    json["grad_output"]["loss_scale_without_overflow"] = window.without_overflow;
    json["grad_output"]["loss_scale_without_flush"] = window.without_flush;
  }
  return json;
}

std::string format_heading(const NumericsReport& report, size_t f) {
  const FormatTotals& all = report.all[f];
  return fmt::format("{}: every layer it takes: logits SQNR {} dB, loss {:+.4g} (FP32 {:.4f})",
                     precision::format_name(report.formats[f]), db(all.logits.sqnr_db()),
                     all.loss_delta / static_cast<double>(report.batches),
                     report.reference_loss / static_cast<double>(report.batches));
}

// One chart of the layers' SQNRs (local and alone) and one of their underflow shares, for one format.
std::vector<compare::ChartSpec> format_charts(const NumericsReport& report, size_t f) {
  const std::string name = precision::format_name(report.formats[f]);
  compare::ChartSpec sqnr{
      "sqnr-" + name, name + ": SQNR per layer (dB, higher is better)", "layer", "dB", false, {}, {}, true};
  compare::ChartSpec underflow{
      "underflow-" + name, name + ": values flushed to zero or subnormal (%)", "layer", "%", false, {}, {}, true};
  compare::ChartSeries local{"local", "#1f77b4", {}, {}}, alone{"model, layer alone", "#ff7f0e", {}, {}, true};
  compare::ChartSeries input{"input", "#2ca02c", {}, {}}, weight{"weight", "#9467bd", {}, {}},
      grad{"output gradient", "#d62728", {}, {}};
  for (size_t i = 0; i < report.layers.size(); ++i) {
    const LayerInFormat& in = report.layers[i].formats[f];
    if (!in.why_not.empty()) continue;
    const double x = static_cast<double>(i);
    const auto add = [&](compare::ChartSeries& series, double y) { series.x.push_back(x), series.y.push_back(y); };
    add(local, std::min(in.local.sqnr_db(), 200.0));
    add(alone, std::min(in.alone_logits.sqnr_db(), 200.0));
    for (auto [series, range] : {std::pair{&input, &in.input}, {&weight, &in.weight}, {&grad, &in.grad_output}})
      add(*series, 100 * range->share(range->flushed + range->subnormal));
    sqnr.markers.push_back({x, local.y.back(), "#1f77b4", report.layers[i].name});
  }
  sqnr.series = {local, alone};
  underflow.series = {input, weight, grad};
  return {sqnr, underflow};
}

}  // namespace

std::vector<size_t> layers_by_damage(const NumericsReport& report, size_t f) {
  std::vector<size_t> order;
  for (size_t i = 0; i < report.layers.size(); ++i)
    if (report.layers[i].formats[f].why_not.empty()) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const LayerInFormat &x = report.layers[a].formats[f], &y = report.layers[b].formats[f];
    const double xs = order_key(x.local.sqnr_db()), ys = order_key(y.local.sqnr_db());
    return xs != ys ? xs < ys : order_key(x.alone_logits.sqnr_db()) < order_key(y.alone_logits.sqnr_db());
  });
  return order;
}

std::string numerics_table(const NumericsReport& report) {
  std::string out = fmt::format(
      "numerics of {} on {}, {} batch(es) of {}{}: {:.1f} s\n", report.model, report.data, report.batches,
      report.batch_size, report.weights.empty() ? " (initial weights)" : ", weights " + report.weights, report.seconds);
  size_t width = 26;  // the names' column
  for (const precision::LayerNumerics& layer : report.layers) width = std::max(width, layer.name.size() + 7);
  for (size_t f = 0; f < report.formats.size(); ++f) {
    out += "\n" + format_heading(report, f) + "\n";
    out += fmt::format("  {:<{}} {:>18} {:>8} {:>8} {:>9} {:>7} {:>7} {:>8} {:>8} {:>8} {:>8}\n",
                       "layer (most damaged first)", width, "kind", "local dB", "alone dB", "loss d", "dW dB", "dX dB",
                       "x under", "w under", "dY under", "saturated");
    for (size_t i : layers_by_damage(report, f)) {
      const precision::LayerNumerics& layer = report.layers[i];
      const LayerInFormat& in = layer.formats[f];
      const auto under = [](const RangeStats& r) { return percent(r.share(r.flushed + r.subnormal)); };
      const double saturated =
          static_cast<double>(in.input.saturated + in.weight.saturated + in.grad_output.saturated) /
          static_cast<double>(std::max<int64_t>(1, in.input.values + in.weight.values + in.grad_output.values));
      out += fmt::format("  {:<{}} {:>18} {:>8} {:>8} {:>9} {:>7} {:>7} {:>8} {:>8} {:>8} {:>8}\n",
                         layer.name + (report.islands[i] ? " [fp32]" : ""), width, label(layer), db(in.local.sqnr_db()),
                         db(in.alone_logits.sqnr_db()), number(alone_loss_delta(in)), db(in.weight_grad.sqnr_db()),
                         db(in.input_grad.sqnr_db()), under(in.input), under(in.weight), under(in.grad_output),
                         percent(saturated));
    }
    for (const precision::LayerNumerics& layer : report.layers)
      if (!layer.formats[f].why_not.empty())
        out += fmt::format("  {:<{}} {}\n", layer.name, width, layer.formats[f].why_not);
  }
  return out;
}

nlohmann::ordered_json numerics_json(const NumericsReport& report) {
  nlohmann::ordered_json json = {{"model", report.model},
                                 {"data", report.data},
                                 {"weights", report.weights},
                                 {"batches", report.batches},
                                 {"batch_size", report.batch_size},
                                 {"reference_loss", report.reference_loss / static_cast<double>(report.batches)},
                                 {"fp16_loss_scale", report.loss_scale},
                                 {"seconds", report.seconds},
                                 {"peak_tensor_mib", static_cast<double>(report.peak_tensor_bytes) / kMiB},
                                 {"peak_process_mib", static_cast<double>(report.peak_process_bytes) / kMiB}};
  std::vector<std::vector<int>> ranks(report.formats.size(), std::vector<int>(report.layers.size(), 0));
  for (size_t f = 0; f < report.formats.size(); ++f) {
    const std::vector<size_t> order = layers_by_damage(report, f);
    for (size_t r = 0; r < order.size(); ++r) ranks[f][order[r]] = static_cast<int>(r) + 1;
    json["formats"][precision::format_name(report.formats[f])] = {
        {"logits", error_json(report.all[f].logits)},
        {"loss_delta", report.all[f].loss_delta / static_cast<double>(report.batches)},
        {"layers_taken", order.size()}};
  }
  json["layers"] = nlohmann::ordered_json::array();
  for (size_t i = 0; i < report.layers.size(); ++i) {
    const precision::LayerNumerics& layer = report.layers[i];
    nlohmann::ordered_json entry = {{"name", layer.name},
                                    {"kind", layer.kind},
                                    {"in_features", layer.in_features},
                                    {"out_features", layer.out_features},
                                    {"macs_per_batch", layer.macs},
                                    {"fp32_island", static_cast<bool>(report.islands[i])}};
    for (size_t f = 0; f < report.formats.size(); ++f)
      entry["formats"][precision::format_name(report.formats[f])] =
          layer_format_json(report, f, layer.formats[f], ranks[f][i]);
    json["layers"].push_back(std::move(entry));
  }
  return json;
}

std::string numerics_html(const NumericsReport& report) {
  std::string html = fmt::format(
      "<!DOCTYPE html>\n<html>\n<head><meta charset=\"utf-8\"><title>mpt numerics: {0}</title>\n"
      "<style>body{{font-family:sans-serif;margin:2em}} td,th{{padding:2px 8px}} .num{{text-align:right}}</style>"
      "</head>\n<body>\n<h1>Numerics of {0} on {1}</h1>\n<p>{2} batch(es) of {3}; SQNR = 10 log10(|FP32|^2 / "
      "|FP32 - format|^2). <i>local</i>: the layer's output from FP32 inputs; <i>model, layer alone</i>: the "
      "logits with only that layer in the format.</p>\n",
      compare::xml_escape(report.model), compare::xml_escape(report.data), report.batches, report.batch_size);
  for (size_t f = 0; f < report.formats.size(); ++f) {
    html += "<h2>" + compare::xml_escape(format_heading(report, f)) + "</h2>\n";
    for (const compare::ChartSpec& chart : format_charts(report, f)) html += compare::svg_line_chart(chart);
  }
  html += "<h2>Layers</h2>\n<table>\n<tr><th>#</th><th>layer</th><th>kind</th></tr>\n";
  for (size_t i = 0; i < report.layers.size(); ++i)
    html += fmt::format("<tr><td class=\"num\">{}</td><td>{}</td><td>{}</td></tr>\n", i,
                        compare::xml_escape(report.layers[i].name), compare::xml_escape(label(report.layers[i])));
  return html + "</table>\n</body>\n</html>\n";
}

}  // namespace mpt::run
