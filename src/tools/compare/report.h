// The three faces of an A/B comparison: a compact terminal table, compare.md, and report.html (one
// self-contained page with inline SVG charts). compare.json is to_json() in comparison.h.
#pragma once

#include <string>

#include "tools/compare/comparison.h"
#include "tools/compare/run_record.h"

namespace mpt::compare {

std::string render_terminal(const Comparison& comparison);
std::string render_markdown(const Comparison& comparison);
// `a` and `b` are the first run of each side: their curves are drawn.
std::string render_html(const Comparison& comparison, const RunRecord& a, const RunRecord& b);

}  // namespace mpt::compare
