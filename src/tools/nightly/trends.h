// ROOT/trends.html: each job's key metrics over nights, as a self-contained page of SVG charts.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace mpt::nightly {

std::string render_trends(const std::string& suite_name, const std::vector<nlohmann::json>& history);

}  // namespace mpt::nightly
