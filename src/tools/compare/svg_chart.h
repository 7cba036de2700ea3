// Self-contained SVG line charts for mpt's HTML reports (ab-compare, nightly trends): no scripts, no external
// files, valid XML, so a report is one file a browser opens anywhere.
#pragma once

#include <string>
#include <vector>

namespace mpt::compare {

struct ChartSeries {
  std::string label;
  std::string color;  // CSS colour
  std::vector<double> x;
  std::vector<double> y;  // non-finite points break the line
  bool dashed = false;    // so a curve drawn over an identical one stays visible
};

struct ChartMarker {
  double x = 0.0;
  double y = 0.0;
  std::string color;
  std::string tooltip;
};

struct ChartSpec {
  std::string id;  // the svg element's id
  std::string title;
  std::string x_label;
  std::string y_label;
  bool log2_y = false;  // loss scales: ticks at powers of two
  std::vector<ChartSeries> series;
  std::vector<ChartMarker> markers;  // drawn as triangles, e.g. loss-scale backoffs
  bool x_from_zero = true;           // steps, nights: the x axis starts at 0
};

std::string svg_line_chart(const ChartSpec& chart);

// Escapes &, <, >, " for XML/HTML text and attributes.
std::string xml_escape(const std::string& text);

}  // namespace mpt::compare
