// The faces of a numerics measurement: a terminal table per format sorted by damage, numerics.json, and
// numerics.html (one page, per format a chart of each layer's SQNR and one of its underflow shares).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "run/numerics.h"

namespace mpt::run {

// The layers format number `format` takes, most damaged first: lowest local SQNR, then lowest alone SQNR.
std::vector<size_t> layers_by_damage(const NumericsReport& report, size_t format);

std::string numerics_table(const NumericsReport& report);
nlohmann::ordered_json numerics_json(const NumericsReport& report);
std::string numerics_html(const NumericsReport& report);

}  // namespace mpt::run
