// Rendering a Comparison. Every number shown comes from the Comparison, so the three outputs agree.
#include "tools/compare/report.h"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>

#include "tools/compare/svg_chart.h"

namespace mpt::compare {
namespace {

struct Row {
  std::string label, a, b, versus;
};

std::string fixed(double value, int digits) {
  return std::isfinite(value) ? fmt::format("{:.{}f}", value, digits) : "-";
}
std::string signed_percent(double fraction) {
  return std::isfinite(fraction) ? fmt::format("{:+.2f}%", 100 * fraction) : "-";
}
std::string times(double ratio) { return std::isfinite(ratio) ? fmt::format("{:.2f}x", ratio) : "-"; }
std::string mib(double bytes) { return bytes > 0 ? fmt::format("{:.0f} MiB", bytes / (1024.0 * 1024.0)) : "-"; }

double ratio_of(double numerator, double denominator) {
  return numerator > 0 && denominator > 0 ? numerator / denominator : NAN;
}

std::string phase_peaks(const SideStats& s) {
  if (s.memory_kind.empty()) return "-";
  return fmt::format("{:.0f} / {:.0f} MiB", s.eval_peak_bytes / 1048576.0, s.checkpoint_peak_bytes / 1048576.0);
}

std::string scale_text(double scale) {
  if (!(scale > 0)) return "-";
  const double exponent = std::log2(scale);
  return exponent == std::floor(exponent) ? fmt::format("2^{}", static_cast<int>(exponent))
                                          : fmt::format("{:g}", scale);
}

std::string to_target(const SideStats& s) {
  if (!s.steps_to_target) return "never";
  return s.seconds_to_target ? fmt::format("step {} ({:.1f} s)", *s.steps_to_target, *s.seconds_to_target)
                             : fmt::format("step {}", *s.steps_to_target);
}

std::string loss_scale_text(const SideStats& s) {
  if (s.loss_scale_mode.empty() || s.loss_scale_mode == "none") return "none";
  return fmt::format("{} {}, min {}, {} backoffs, {} growths, {} skipped", s.loss_scale_mode, scale_text(s.final_scale),
                     scale_text(s.min_scale), s.backoffs, s.growths, s.skipped_steps);
}

std::vector<Row> rows(const Comparison& c) {
  const SideStats &a = c.a, &b = c.b;
  auto accuracy = [&](const SideStats& s) {
    std::string text = fixed(s.accuracy, 4);
    if (c.repeats > 1 && std::isfinite(s.accuracy)) text += fmt::format(" +- {:.4f}", s.accuracy_stddev);
    return text;
  };
  std::vector<Row> table = {
      {"precision", a.precision, b.precision, ""},
      {"status", a.status, b.status, ""},
      {"test accuracy", accuracy(a), accuracy(b), signed_percent(c.accuracy_gap)},
      {"eval loss", fixed(a.eval_loss, 4), fixed(b.eval_loss, 4), ""},
      {"train loss (last epoch)", fixed(a.final_train_loss, 4), fixed(b.final_train_loss, 4), ""},
      {fmt::format("reaches loss {:.4f}", c.convergence_target), to_target(a), to_target(b),
       a.steps_to_target && b.steps_to_target && *a.steps_to_target > 0
           ? times(static_cast<double>(*b.steps_to_target) / static_cast<double>(*a.steps_to_target)) + " steps"
           : ""},
      {"loss roughness", fixed(a.roughness, 4), fixed(b.roughness, 4),
       a.roughness > 0 ? times(b.roughness / a.roughness) : ""},
      {"samples/s", fixed(a.samples_per_sec, 0), fixed(b.samples_per_sec, 0), times(c.speedup)},
      {"median step", fixed(a.median_step_ms, 2) + " ms", fixed(b.median_step_ms, 2) + " ms", times(c.step_time_ratio)},
      {"peak memory, training steps", mib(a.peak_memory_bytes), mib(b.peak_memory_bytes), times(c.memory_ratio)},
      {"peak memory, eval / checkpoint", phase_peaks(a), phase_peaks(b), ""},
      {"peak memory, whole process", mib(a.process_peak_bytes), mib(b.process_peak_bytes),
       times(ratio_of(b.process_peak_bytes, a.process_peak_bytes))},
      {fmt::format("max batch within {}", mib(static_cast<double>(c.max_batch_budget_bytes))),
       a.max_batch > 0 ? std::to_string(a.max_batch) : "-", b.max_batch > 0 ? std::to_string(b.max_batch) : "-",
       times(ratio_of(static_cast<double>(b.max_batch), static_cast<double>(a.max_batch)))},
      {"loss scale", loss_scale_text(a), loss_scale_text(b), ""},
  };
  if (c.max_batch_budget_bytes <= 0) table.erase(table.end() - 2);
  return table;
}

std::string verdict_line(const Comparison& c) {
  std::string line = fmt::format("verdict: {}", verdict_name(c.verdict));
  if (c.verdict == Verdict::kPass)
    line += fmt::format(" (accuracy gap {} within {}; B {} the throughput)", signed_percent(c.accuracy_gap),
                        fmt::format("{:.2f}%", 100 * c.thresholds.max_accuracy_drop),
                        std::isfinite(c.speedup) ? fmt::format("has {:.2f}x", c.speedup) : "has unknown");
  return line;
}

}  // namespace

std::string render_terminal(const Comparison& c) {
  const std::vector<Row> table = rows(c);
  size_t w0 = 0, w1 = ("A: " + c.a.name).size(), w2 = ("B: " + c.b.name).size();
  for (const Row& r : table)
    w0 = std::max(w0, r.label.size()), w1 = std::max(w1, r.a.size()), w2 = std::max(w2, r.b.size());
  std::string out = fmt::format("{:<{}}  {:<{}}  {:<{}}  B vs A\n", "", w0, "A: " + c.a.name, w1, "B: " + c.b.name, w2);
  for (const Row& r : table)
    out += fmt::format("{:<{}}  {:<{}}  {:<{}}  {}\n", r.label, w0, r.a, w1, r.b, w2, r.versus);
  out += verdict_line(c) + "\n";
  for (const auto& f : c.failures) out += "  FAIL: " + f + "\n";
  for (const auto& n : c.notes) out += "  note: " + n + "\n";
  return out;
}

std::string render_markdown(const Comparison& c) {
  std::string out =
      fmt::format("# A/B comparison: {} (A) vs {} (B)\n\n**{}**\n\n", c.a.name, c.b.name, verdict_line(c));
  for (const auto& f : c.failures) out += "- FAIL: " + f + "\n";
  for (const auto& n : c.notes) out += "- Note: " + n + "\n";
  out += fmt::format("\n| measure | A: {} | B: {} | B vs A |\n|---|---|---|---|\n", c.a.name, c.b.name);
  for (const Row& r : rows(c)) out += fmt::format("| {} | {} | {} | {} |\n", r.label, r.a, r.b, r.versus);
  out += fmt::format("\nRuns: A `{}`, B `{}`; {} repeat(s).\n", c.a.dir, c.b.dir, c.repeats);
  if (!c.allowed_differences.empty()) {
    out += "\nSpec differences besides precision, allowed with --allow-diff:\n";
    for (const auto& d : c.allowed_differences) out += "- " + d + "\n";
  }
  out += "\n## Definitions\n\n";
  for (const auto& d : metric_definitions(c.thresholds)) out += "- " + d + "\n";
  return out;
}

namespace {

const char* kColorA = "#1f77b4";
const char* kColorB = "#d62728";

std::vector<double> as_double(const std::vector<int64_t>& steps) { return {steps.begin(), steps.end()}; }

// B is dashed so that where the two runs agree, both stay visible.
ChartSeries series(const std::string& label, const char* color, const Curve& curve) {
  return {label, color, as_double(curve.steps), curve.values, std::string(color) == kColorB};
}

std::string css() {
  return R"(body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px auto;max-width:1400px;color:#222;padding:0 16px}
h1{font-size:1.5em;margin-bottom:4px}
.verdict{display:inline-block;padding:6px 14px;border-radius:6px;font-weight:bold;font-size:1.2em;color:#fff}
.PASS{background:#2e7d32}.FAIL{background:#c62828}.RUN{background:#6d4c41}
table{border-collapse:collapse;margin:16px 0}td,th{border:1px solid #ccc;padding:4px 10px;text-align:left}
th{background:#f3f3f3}td.num{font-variant-numeric:tabular-nums}
.charts{display:flex;flex-wrap:wrap;gap:16px}
.chart{border:1px solid #ddd;background:#fff}
.chart .plot{fill:#fafafa;stroke:#bbb}.chart .grid{stroke:#e6e6e6}
.chart .tick{font-size:11px;fill:#555}.chart .axis{font-size:12px;fill:#333}
.chart .legend{font-size:12px;fill:#222}.chart .chart-title{font-size:14px;font-weight:bold;fill:#222}
.chart .empty{font-size:14px;fill:#999}
li{margin:3px 0}code{background:#f3f3f3;padding:1px 4px}
)";
}

// Each side's loss scale where it ever left 1, and its backoffs as markers.
ChartSpec loss_scale_chart(const RunRecord& a, const RunRecord& b, const std::string& a_label,
                           const std::string& b_label) {
  ChartSpec scale{"chart-loss-scale", "Loss scale (triangles: backoffs)", "step", "scale", true, {}, {}};
  for (const auto* run : {&a, &b}) {
    const bool is_a = run == &a;
    bool scaled = false;
    for (double v : run->loss_scale.values) scaled |= v != 1.0;
    if (scaled) scale.series.push_back(series(is_a ? a_label : b_label, is_a ? kColorA : kColorB, run->loss_scale));
    for (const auto& e : run->scale_events)
      if (e.kind == "backoff")
        scale.markers.push_back({static_cast<double>(e.step), e.new_scale, is_a ? kColorA : kColorB,
                                 fmt::format("{}: backoff at step {} to {:g}", is_a ? "A" : "B", e.step, e.new_scale)});
  }
  return scale;
}

// The FP8 scales each side logged (none unless precision.mode is fp8), one colour per role and side.
ChartSpec fp8_scale_chart(const RunRecord& a, const RunRecord& b, const std::string& a_label,
                          const std::string& b_label) {
  ChartSpec fp8{
      "chart-fp8-scale", "FP8 scales, smallest over the layers (precision.mode fp8)", "step", "scale", true, {}, {}};
  const char* fp8_colors[2][3] = {{"#2ca02c", "#9467bd", "#d62728"}, {"#98df8a", "#c5b0d5", "#ff9896"}};  // A, B
  for (const auto* run : {&a, &b}) {
    const std::pair<const char*, const Curve*> roles[] = {{"input", &run->fp8_input_scale},
                                                          {"weight", &run->fp8_weight_scale},
                                                          {"output gradient", &run->fp8_grad_scale}};
    for (size_t r = 0; r < 3; ++r)
      if (!roles[r].second->empty())
        fp8.series.push_back(series(fmt::format("{} {}", run == &a ? a_label : b_label, roles[r].first),
                                    fp8_colors[run == &a ? 0 : 1][r], *roles[r].second));
  }
  return fp8;
}

std::vector<ChartSpec> html_charts(const Comparison& c, const RunRecord& a, const RunRecord& b) {
  const std::string a_label = "A " + c.a.name + " (" + c.a.precision + ")";
  const std::string b_label = "B " + c.b.name + " (" + c.b.precision + ")";
  std::vector<ChartSpec> charts;
  charts.push_back({"chart-loss",
                    "Training loss",
                    "step",
                    "loss",
                    false,
                    {series(a_label, kColorA, a.train_loss), series(b_label, kColorB, b.train_loss)},
                    {}});
  const bool accuracy = !a.eval_accuracy.empty() || !b.eval_accuracy.empty();
  charts.push_back({"chart-eval",
                    accuracy ? "Test accuracy" : "Evaluation loss",
                    "step",
                    accuracy ? "accuracy" : "loss",
                    false,
                    {series(a_label, kColorA, accuracy ? a.eval_accuracy : a.eval_loss),
                     series(b_label, kColorB, accuracy ? b.eval_accuracy : b.eval_loss)},
                    {}});
  charts.push_back(loss_scale_chart(a, b, a_label, b_label));
  ChartSpec fp8 = fp8_scale_chart(a, b, a_label, b_label);
  if (!fp8.series.empty()) charts.push_back(std::move(fp8));
  charts.push_back({"chart-throughput",
                    "Throughput",
                    "step",
                    "samples/s",
                    false,
                    {series(a_label, kColorA, a.samples_per_sec), series(b_label, kColorB, b.samples_per_sec)},
                    {}});
  return charts;
}

// The page's head, title, verdict badge and the reasons for the verdict.
std::string html_heading(const Comparison& c) {
  const std::string verdict_class = c.verdict == Verdict::kRunFailed ? "RUN" : verdict_name(c.verdict);
  std::string html = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n";
  html += fmt::format("<title>mpt A/B: {} vs {}</title>\n<style>\n{}</style>\n</head>\n<body>\n", xml_escape(c.a.name),
                      xml_escape(c.b.name), css());
  html += fmt::format("<h1>A/B comparison: {} vs {}</h1>\n", xml_escape(c.a.name), xml_escape(c.b.name));
  html += fmt::format("<p><span id=\"verdict\" class=\"verdict {}\">{}</span> {}</p>\n", verdict_class,
                      verdict_name(c.verdict), xml_escape(verdict_line(c)));
  if (!c.failures.empty() || !c.notes.empty()) {
    html += "<ul id=\"reasons\">\n";
    for (const auto& f : c.failures) html += "<li><b>FAIL:</b> " + xml_escape(f) + "</li>\n";
    for (const auto& n : c.notes) html += "<li>" + xml_escape(n) + "</li>\n";
    html += "</ul>\n";
  }
  return html;
}

std::string html_summary_table(const Comparison& c) {
  std::string html =
      fmt::format("<table id=\"summary\">\n<tr><th>measure</th><th>A: {}</th><th>B: {}</th><th>B vs A</th></tr>\n",
                  xml_escape(c.a.name), xml_escape(c.b.name));
  for (const Row& r : rows(c))
    html += fmt::format(
        "<tr><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>"
        "<td class=\"num\">{}</td></tr>\n",
        xml_escape(r.label), xml_escape(r.a), xml_escape(r.b), xml_escape(r.versus));
  html += "</table>\n";
  return html;
}

// The runs, the spec differences allowed, and what every measure means.
std::string html_footer(const Comparison& c) {
  std::string html = fmt::format(
      "<p>Runs: A <code>{}</code>, B <code>{}</code>; {} repeat(s). TensorBoard: "
      "<code>tensorboard --logdir {}</code> overlays them.</p>\n",
      xml_escape(c.a.dir), xml_escape(c.b.dir), c.repeats,
      xml_escape(std::filesystem::path(c.a.dir).parent_path().string()));
  if (!c.allowed_differences.empty()) {
    html += "<p>Spec differences besides precision, allowed with --allow-diff:</p>\n<ul>\n";
    for (const auto& d : c.allowed_differences) html += "<li>" + xml_escape(d) + "</li>\n";
    html += "</ul>\n";
  }
  html += "<h2>Definitions</h2>\n<ul id=\"definitions\">\n";
  for (const auto& d : metric_definitions(c.thresholds)) html += "<li>" + xml_escape(d) + "</li>\n";
  html += "</ul>\n</body>\n</html>\n";
  return html;
}

}  // namespace

std::string render_html(const Comparison& c, const RunRecord& a, const RunRecord& b) {
  const std::vector<ChartSpec> charts = html_charts(c, a, b);
  std::string html = html_heading(c) + html_summary_table(c);
  html += "<div class=\"charts\">\n";
  for (const auto& chart : charts) html += svg_line_chart(chart);
  html += "</div>\n";
  html += html_footer(c);
  return html;
}

}  // namespace mpt::compare
