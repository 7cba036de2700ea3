// Trend page: one section per job, charts against the night number, failures and regressions marked.
#include "tools/nightly/trends.h"

#include <fmt/format.h>

#include <cmath>
#include <map>

#include "tools/compare/svg_chart.h"

namespace mpt::nightly {
namespace {

using compare::xml_escape;

double metric(const nlohmann::json& record, const char* key) {
  if (!record.contains("metrics") || !record["metrics"].contains(key) || !record["metrics"][key].is_number())
    return NAN;
  return record["metrics"][key].get<double>();
}

std::string chart(const std::string& id, const std::string& title, const std::string& y_label, const char* key,
                  const std::vector<const nlohmann::json*>& records) {
  compare::ChartSpec spec{id, title, "night", y_label, false, {}, {}};
  spec.x_from_zero = false;
  compare::ChartSeries series{title, "#1f77b4", {}, {}};
  for (size_t i = 0; i < records.size(); ++i) {
    const auto& record = *records[i];
    const double x = static_cast<double>(i + 1), y = metric(record, key);
    series.x.push_back(x), series.y.push_back(y);
    const bool regressed = record.contains("regressions") && !record["regressions"].empty();
    if (std::isfinite(y) && (regressed || record.value("status", "") != "ok"))
      spec.markers.push_back({x, y, "#d62728",
                              fmt::format("{}: {}{}", record.value("night", "?"), record.value("status", "?"),
                                          regressed ? " (regression)" : "")});
  }
  spec.series.push_back(std::move(series));
  return compare::svg_line_chart(spec);
}

}  // namespace

std::string render_trends(const std::string& suite_name, const std::vector<nlohmann::json>& history) {
  std::map<std::string, std::vector<const nlohmann::json*>> by_job;
  std::vector<std::string> order;
  for (const auto& record : history) {
    const std::string job = record.value("job", "?");
    if (!by_job.count(job)) order.push_back(job);
    by_job[job].push_back(&record);
  }
  std::string html = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n";
  html += fmt::format("<title>mpt nightly trends: {}</title>\n", xml_escape(suite_name));
  html += R"(<style>
body{font-family:system-ui,sans-serif;margin:24px auto;max-width:1400px;color:#222;padding:0 16px}
table{border-collapse:collapse;margin:8px 0 24px}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}
th{background:#f3f3f3}.bad{color:#c62828;font-weight:bold}
.charts{display:flex;flex-wrap:wrap;gap:16px}.chart{border:1px solid #ddd;background:#fff}
.chart .plot{fill:#fafafa;stroke:#bbb}.chart .grid{stroke:#e6e6e6}.chart .tick{font-size:11px;fill:#555}
.chart .axis{font-size:12px;fill:#333}.chart .legend{font-size:12px}.chart .chart-title{font-size:14px;font-weight:bold}
.chart .empty{font-size:14px;fill:#999}
</style>
</head>
<body>
)";
  html += fmt::format(
      "<h1>mpt nightly: {}</h1>\n<p>{} record(s) in history.jsonl; red triangles mark failed or "
      "regressed nights.</p>\n",
      xml_escape(suite_name), history.size());
  int index = 0;
  for (const auto& job : order) {
    const auto& records = by_job[job];
    const bool ab = records.back()->value("kind", "") == "ab_compare";
    const std::string id = fmt::format("job{}", index++);
    html += fmt::format("<h2 id=\"{}\">{} <small>({})</small></h2>\n<div class=\"charts\">\n", id, xml_escape(job),
                        ab ? "A/B" : "train");
    if (ab) {
      html += chart(id + "-speedup", "Speed-up B/A", "x", "speedup", records);
      html += chart(id + "-gap", "Accuracy gap B-A", "gap", "accuracy_gap", records);
    } else {
      html += chart(id + "-accuracy", "Test accuracy", "accuracy", "accuracy", records);
      html += chart(id + "-throughput", "Throughput (training run)", "samples/s", "samples_per_sec", records);
      html +=
          chart(id + "-bench", "Throughput (median of the bench runs)", "samples/s", "bench_samples_per_sec", records);
      html += chart(id + "-memory", "Peak memory, training steps", "bytes", "peak_memory_bytes", records);
    }
    html += "</div>\n<table>\n<tr><th>#</th><th>night</th><th>status</th><th>seconds</th><th>regressions</th></tr>\n";
    for (size_t i = records.size() > 20 ? records.size() - 20 : 0; i < records.size(); ++i) {
      const auto& r = *records[i];
      std::string regressions;
      for (const auto& text : r.value("regressions", nlohmann::json::array()))
        regressions += text.get<std::string>() + "; ";
      const std::string status = r.value("status", "?");
      html += fmt::format("<tr><td>{}</td><td>{}</td><td class=\"{}\">{}</td><td>{:.1f}</td><td>{}</td></tr>\n", i + 1,
                          xml_escape(r.value("night", "?")), status == "ok" ? "" : "bad", xml_escape(status),
                          r.value("seconds", 0.0), xml_escape(regressions));
    }
    html += "</table>\n";
  }
  html += "</body>\n</html>\n";
  return html;
}

}  // namespace mpt::nightly
