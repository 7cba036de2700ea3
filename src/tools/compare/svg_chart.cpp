// SVG line charts: linear x, linear or log2 y, "nice" ticks, a legend, optional markers.
#include "tools/compare/svg_chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace mpt::compare {
namespace {

constexpr double kWidth = 660, kHeight = 300;
constexpr double kLeft = 70, kRight = 20, kTop = 46, kBottom = 46;

// Tick positions at 1, 2 or 5 x 10^k spacing covering [low, high].
std::vector<double> nice_ticks(double low, double high, int wanted = 5) {
  if (!(high > low)) return {low};
  const double raw = (high - low) / wanted;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * magnitude >= raw) {
      step = m * magnitude;
      break;
    }
  std::vector<double> ticks;
  for (double t = std::ceil(low / step) * step; t <= high + step * 1e-9; t += step)
    ticks.push_back(std::abs(t) < step * 1e-9 ? 0.0 : t);
  return ticks;
}

std::string tick_label(double value) {
  if (value != 0.0 && (std::abs(value) >= 1e5 || std::abs(value) < 1e-3)) return fmt::format("{:.1e}", value);
  return fmt::format("{:g}", value);
}

}  // namespace

std::string xml_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

namespace {

double transform_y(bool log2_y, double y) { return log2_y ? (y > 0 ? std::log2(y) : NAN) : y; }

// The chart's data range, and the plot area it maps onto; the range starts empty (min +inf, max -inf).
struct Frame {
  bool log2_y = false;
  double x_min = std::numeric_limits<double>::infinity(), x_max = -x_min, y_min = x_min, y_max = -x_min;
  double plot_w = kWidth - kLeft - kRight, plot_h = kHeight - kTop - kBottom;

  void extend(double x, double y) {
    if (!std::isfinite(x) || !std::isfinite(y)) return;
    x_min = std::min(x_min, x), x_max = std::max(x_max, x), y_min = std::min(y_min, y), y_max = std::max(y_max, y);
  }
  double px(double x) const { return kLeft + (x - x_min) / (x_max - x_min) * plot_w; }
  double py(double y) const { return kTop + (1.0 - (y - y_min) / (y_max - y_min)) * plot_h; }
};

// The range of every finite point and marker (y transformed); x_min stays infinite when there is none.
Frame data_frame(const ChartSpec& chart) {
  Frame frame;
  frame.log2_y = chart.log2_y;
  for (const auto& s : chart.series)
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) frame.extend(s.x[i], transform_y(chart.log2_y, s.y[i]));
  for (const auto& m : chart.markers) frame.extend(m.x, transform_y(chart.log2_y, m.y));
  return frame;
}

// Widens a degenerate range and pads y, so that no curve lies on the plot's edge.
void pad_frame(Frame& frame, bool x_from_zero) {
  if (x_from_zero) frame.x_min = std::min(frame.x_min, 0.0);
  if (frame.x_max == frame.x_min) frame.x_max = frame.x_min + 1;
  if (frame.y_max == frame.y_min) {  // a flat line: a band around it in proportion to its value
    const double half = frame.y_min != 0.0 ? std::abs(frame.y_min) * 0.05 : 0.01;
    frame.y_min -= half, frame.y_max += half;
  }
  const double pad = (frame.y_max - frame.y_min) * 0.05;
  frame.y_min -= pad, frame.y_max += pad;
}

std::string chart_header(const ChartSpec& chart) {
  return fmt::format(R"(<svg id="{}" class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {} {}" )"
                     R"(width="{}" height="{}" role="img">)"
                     "\n<title>{}</title>\n"
                     R"(<text x="{}" y="18" class="chart-title">{}</text>)"
                     "\n",
                     xml_escape(chart.id), kWidth, kHeight, kWidth, kHeight, xml_escape(chart.title), kLeft,
                     xml_escape(chart.title));
}

// log2 y: every whole power of two in range, thinned to every other one until at most 8 remain; linear y: nice ticks.
std::vector<double> y_tick_values(const Frame& frame) {
  if (!frame.log2_y) return nice_ticks(frame.y_min, frame.y_max);
  std::vector<double> y_ticks;
  for (double k = std::ceil(frame.y_min); k <= std::floor(frame.y_max); ++k) y_ticks.push_back(k);
  while (y_ticks.size() > 8) {  // thin out long ranges of powers of two
    std::vector<double> thinned;
    for (size_t i = 0; i < y_ticks.size(); i += 2) thinned.push_back(y_ticks[i]);
    y_ticks.swap(thinned);
  }
  return y_ticks;
}

// The plot area, the y grid with its labels, the x tick labels and both axis titles.
std::string chart_axes(const ChartSpec& chart, const Frame& frame) {
  const double plot_w = frame.plot_w, plot_h = frame.plot_h;
  std::string svg = fmt::format(R"(<rect x="{}" y="{}" width="{}" height="{}" class="plot"/>)"
                                "\n",
                                kLeft, kTop, plot_w, plot_h);
  for (double t : y_tick_values(frame)) {
    const std::string label = chart.log2_y ? fmt::format("2^{}", static_cast<int>(t)) : tick_label(t);
    svg += fmt::format(R"(<line x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" y2="{:.1f}" class="grid"/>)"
                       R"(<text x="{:.1f}" y="{:.1f}" class="tick" text-anchor="end">{}</text>)"
                       "\n",
                       kLeft, frame.py(t), kLeft + plot_w, frame.py(t), kLeft - 6, frame.py(t) + 4, label);
  }
  bool integral_x = true;  // night numbers, steps: no tick at 1.5
  for (const auto& s : chart.series)
    for (double x : s.x) integral_x = integral_x && x == std::floor(x);
  for (double t : nice_ticks(frame.x_min, frame.x_max, 6))
    if (!integral_x || t == std::floor(t))
      svg += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" class="tick" text-anchor="middle">{}</text>)"
                         "\n",
                         frame.px(t), kTop + plot_h + 16, tick_label(t));
  svg += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" class="axis" text-anchor="middle">{}</text>)"
                     "\n",
                     kLeft + plot_w / 2, kHeight - 8, xml_escape(chart.x_label));
  svg += fmt::format(R"svg(<text x="14" y="{:.1f}" class="axis" text-anchor="middle" )svg"
                     R"svg(transform="rotate(-90 14 {:.1f})">{}</text>)svg"
                     "\n",
                     kTop + plot_h / 2, kTop + plot_h / 2, xml_escape(chart.y_label));
  return svg;
}

// One series as polylines broken at non-finite points.
std::string series_lines(const ChartSeries& s, const Frame& frame) {
  std::string svg, points;
  auto flush = [&] {
    if (!points.empty())
      svg += fmt::format(R"(<polyline fill="none" stroke="{}" stroke-width="1.6"{} points="{}"/>)"
                         "\n",
                         xml_escape(s.color), s.dashed ? R"( stroke-dasharray="5,3")" : "", points);
    points.clear();
  };
  for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
    const double y = transform_y(frame.log2_y, s.y[i]);
    if (!std::isfinite(s.x[i]) || !std::isfinite(y)) {
      flush();
      continue;
    }
    points += fmt::format("{}{:.1f},{:.1f}", points.empty() ? "" : " ", frame.px(s.x[i]), frame.py(y));
  }
  flush();
  return svg;
}

// Few points (evaluations, a single final one) are also drawn as dots, so one point is still seen.
std::string series_dots(const ChartSeries& s, const Frame& frame) {
  std::string svg;
  if (s.x.size() > 25) return svg;
  for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
    const double y = transform_y(frame.log2_y, s.y[i]);
    if (std::isfinite(s.x[i]) && std::isfinite(y))
      svg += fmt::format(R"(<circle cx="{:.1f}" cy="{:.1f}" r="3" fill="{}"/>)"
                         "\n",
                         frame.px(s.x[i]), frame.py(y), xml_escape(s.color));
  }
  return svg;
}

std::string chart_markers(const ChartSpec& chart, const Frame& frame) {
  std::string svg;
  for (const auto& m : chart.markers) {
    const double y = transform_y(chart.log2_y, m.y);
    if (!std::isfinite(m.x) || !std::isfinite(y)) continue;
    const double x0 = frame.px(m.x), y0 = frame.py(y);
    svg += fmt::format(R"(<path d="M{:.1f},{:.1f} l-4,-8 h8 z" fill="{}" class="marker"><title>{}</title></path>)"
                       "\n",
                       x0, y0, xml_escape(m.color), xml_escape(m.tooltip));
  }
  return svg;
}

// The legend is one row under the title, outside the plot, so it never hides a curve.
std::string chart_legend(const ChartSpec& chart) {
  std::string svg;
  double legend_x = kLeft;
  for (const auto& s : chart.series) {
    svg += fmt::format(R"(<line x1="{:.1f}" y1="31" x2="{:.1f}" y2="31" stroke="{}" stroke-width="3"{}/>)"
                       R"(<text x="{:.1f}" y="35" class="legend">{}</text>)"
                       "\n",
                       legend_x, legend_x + 20, xml_escape(s.color), s.dashed ? R"( stroke-dasharray="5,3")" : "",
                       legend_x + 26, xml_escape(s.label));
    legend_x += 26 + 6.5 * static_cast<double>(s.label.size()) + 18;
  }
  return svg;
}

}  // namespace

std::string svg_line_chart(const ChartSpec& chart) {
  Frame frame = data_frame(chart);
  std::string svg = chart_header(chart);
  if (!std::isfinite(frame.x_min)) {
    svg += fmt::format(R"(<text x="{}" y="{}" class="empty">no data</text>)"
                       "\n</svg>\n",
                       kWidth / 2 - 30, kHeight / 2);
    return svg;
  }
  pad_frame(frame, chart.x_from_zero);
  svg += chart_axes(chart, frame);
  for (const auto& s : chart.series) svg += series_lines(s, frame) + series_dots(s, frame);
  svg += chart_markers(chart, frame);
  svg += chart_legend(chart);
  svg += "</svg>\n";
  return svg;
}

}  // namespace mpt::compare
