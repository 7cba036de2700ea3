// Delivering a directory to an MLflow server, in as many sittings as it takes: a training run directory (params,
// metrics and events as they grow, each at the time it was written, then the summary, the key files as artifacts
// and the final status) or an A/B comparison (a parent run holding the verdict and report, its two sides as child
// runs). What has gone out is kept in the directory's mlflow.json, so a resumed run continues its MLflow run and
// nothing is sent twice. Credentials never leave in a tag, a param or mlflow.json (common/uri.h).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "tools/mlflow/client.h"

namespace mpt::mlflow {

// Where and how directories are tracked: the spec's tracking.mlflow keys, with MLflow's environment variables.
struct Target {
  std::string uri;  // http(s)://...; empty: tracking off
  std::string experiment;
  std::string run_name;  // empty: the directory's name
  KeyValues tags;
  std::string spool;   // folder of directories that could not be delivered
  std::string source;  // the command that made the directory, for mlflow.source.name
};

// The state file of a delivered directory.
inline constexpr const char* kStateFile = "mlflow.json";

class RunDelivery {
 public:
  RunDelivery(Client& client, Target target, std::string run_dir, std::string parent_run_id = "");

  // The MLflow run (created on first use), the params once, the metrics and events added since the last call.
  void deliver_progress();
  // deliver_progress, then, when summary.json is there, its answers, the artifacts and the terminal status.
  void deliver_final();
  const RunInfo& run();

 private:
  void ensure_run();
  void save_state();

  Client& client_;
  Target target_;
  std::string dir_, parent_;
  nlohmann::json state_;
  RunInfo run_;
  bool checked_ = false;
};

// An ab-compare output folder: the parent run (compare.json's numbers as metrics, the verdict as a tag, the
// report files as artifacts) and each side's run directory (compare.json's run_dir, and the run directories
// inside the folder) as a child run.
void deliver_comparison(Client& client, const Target& target, const std::string& out_dir,
                        const std::string& parent_run_id = "");

// A nightly's night folder: the parent run (each job's numbers as <job>/<metric>, the regressions as a tag,
// summary.json, summary.md and night.json as artifacts) and each job's folder as a child run (an A/B job's
// comparison with its own sides below it).
void deliver_night(Client& client, const Target& target, const std::string& night_dir);

// An `mpt numerics` folder: one run with each format's whole-model numbers as metrics (<format>/logits/sqnr_db,
// ...), each format's most damaged layer as a tag, numerics.json and numerics.html as artifacts.
void deliver_numerics(Client& client, const Target& target, const std::string& dir);

// One delivery of `dir` by its kind: "comparison", "night", "numerics", or "run" (a run directory).
void deliver_directory(Client& client, const Target& target, const std::string& dir, const std::string& kind);

// A resume is about to cut the bytes [cut_begin, cut_end) out of `file` ("metrics.jsonl" or "events.jsonl") of
// `run_dir`: the lines among them already sent are remembered (by kind, step and tensor), so that when the
// resumed run writes them again they are neither sent nor counted twice.
void forget_cut_lines(const std::string& run_dir, const std::string& file, uint64_t cut_begin, uint64_t cut_end);

}  // namespace mpt::mlflow
