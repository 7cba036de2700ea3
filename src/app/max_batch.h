// `mpt bench --max-batch` and `mpt ab-compare --max-batch-budget`: the largest batch a spec trains with inside a
// memory budget, for the seed's question "does mixed precision free memory for a bigger batch".
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace mpt::app {

// The largest batch, a multiple of 8 from `start` up, whose training-step peak memory in precision `mode` stays
// within `budget_bytes`: doubling, then bisection. Each trial is appended to `trials`; 0 when even the first fails.
int64_t largest_batch(const std::string& spec_path, const std::vector<std::string>& overrides, const std::string& mode,
                      int64_t start, int64_t budget_bytes, nlohmann::json& trials);

}  // namespace mpt::app
