// ROOT/history.jsonl: one record per job per night, appended so that a crash or a full disk never damages
// earlier records; and regression detection against the median of a job's recent successful nights.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "tools/nightly/suite.h"

namespace mpt::nightly {

// Appends `record` as one line. On any failure (ENOSPC, EFBIG, ...) the file is cut back to its previous length
// and mpt::Error names the file and the reason.
void append_history(const std::string& path, const nlohmann::json& record);

// Every record; a torn final line (a crash mid-append) is ignored, any other bad line is an error.
std::vector<nlohmann::json> read_history(const std::string& path);

// What changed for the worse in `current` (a job's record tonight) against the median of the last
// rules.window records of the same job with status "ok" in `history` (tonight excluded). Empty when fine or
// when there is no history yet.
// A job during which other work used more than rules.max_other_cpu of the CPUs (its "load") is not judged on
// throughput, and no such night is a throughput baseline; `notes`, when given, says so. When the throughput rule
// fires, `throughput_flagged` (when given) gets the metric it judged ("bench_samples_per_sec", ...).
std::vector<std::string> find_regressions(const nlohmann::json& current, const std::vector<nlohmann::json>& history,
                                          const RegressionRules& rules, std::vector<std::string>* notes = nullptr,
                                          std::string* throughput_flagged = nullptr);

double median(std::vector<double> values);

}  // namespace mpt::nightly
