// Running mpt's own subcommands as child processes (ab-compare's runs, nightly's jobs): each run then owns its
// peak memory, threads and crashes, and a time budget can stop it.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace mpt::process {

struct ChildOptions {
  std::string log_path;      // stdout and stderr appended here; empty: inherit ours
  double timeout_sec = 0.0;  // 0: none; else SIGTERM at the budget (mpt checkpoints), SIGKILL after grace
  double grace_sec = 60.0;
  bool own_process_group = false;  // so a timeout reaches grandchildren (ab-compare's runs) too
};

struct ChildResult {
  int exit_code = 0;  // the child's exit status, or 128 + signal when a signal ended it
  bool timed_out = false;
  double seconds = 0.0;
};

// The path of the running mpt binary, for re-invoking it.
std::string self_executable();

// Runs `args` (args[0] is the program path) and waits for it. `stop_requested`, when it becomes non-zero (set
// by a signal handler), is forwarded to the child as SIGTERM. Throws mpt::Error when the child cannot start.
ChildResult run_child(const std::vector<std::string>& args, const ChildOptions& options,
                      const volatile int* stop_requested = nullptr);

struct BenchResult {
  ChildResult child;
  nlohmann::json result;  // `mpt bench --json-out`'s object; null when the bench failed or wrote none
};

// `mpt bench SPEC OVERRIDES... FLAGS... --json-out RESULT_PATH` in a child process (ab-compare's speed rounds,
// nightly's timings, the max-batch search), the result file read back and removed.
BenchResult run_bench(const std::string& spec_path, const std::vector<std::string>& overrides,
                      const std::vector<std::string>& flags, const std::string& result_path,
                      const ChildOptions& options, const volatile int* stop_requested = nullptr);

}  // namespace mpt::process
