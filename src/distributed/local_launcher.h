// `mpt train --nproc N`: the single-machine case of torchrun (its "standalone" mode). mpt starts N copies of
// itself with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1 and a free MASTER_PORT,
// forwards SIGINT/SIGTERM to them, and when one fails stops the others, so a crash never leaves ranks waiting.
#pragma once

#include <string>
#include <vector>

namespace mpt::distributed {

// A rank that did not exit 0: how it ended ("exited with code 1", "was killed by signal 9 (Killed)").
struct RankExit {
  int rank = 0;
  int exit_code = 0;  // its own code, or 128 + the signal that killed it
  bool signalled = false;
  std::string how;
};

struct LaunchOutcome {
  std::vector<RankExit> failures;  // every rank that did not exit 0, the first first; empty: all succeeded
  bool stop_requested = false;     // SIGINT/SIGTERM reached the launcher and was forwarded to the ranks
};

// Runs `args` (args[0] is the program) as ranks 0..nproc-1 and waits for all of them; the first failure is
// reported on stderr.
LaunchOutcome launch_local_workers(int nproc, const std::vector<std::string>& args);

}  // namespace mpt::distributed
