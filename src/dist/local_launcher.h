// `mpt train --nproc N`: the single-machine case of torchrun (its "standalone" mode). mpt starts N copies of
// itself with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1 and a free MASTER_PORT,
// forwards SIGINT/SIGTERM to them, and when one fails stops the others, so a crash never leaves ranks waiting.
#pragma once

#include <string>
#include <vector>

namespace mpt::dist {

// Runs `args` (args[0] is the program) as ranks 0..nproc-1 and waits for all of them. Returns 0 when every
// rank succeeded, else the exit code of the first rank that failed (128 + signal when one was killed), after
// reporting it on stderr.
int launch_local_workers(int nproc, const std::vector<std::string>& args);

}  // namespace mpt::dist
