// What a command given "a checkpoint file or a run directory" reads: the file, or the run's newest checkpoint that
// verifies (read-only: a run still training may be writing its next one beside them).
#pragma once

#include <string>

namespace mpt::app {

// `source` itself when it is a file; for a run directory its newest valid checkpoint, each newer one that fails
// verification reported on stderr. Throws UsageError for neither, Error when no checkpoint verifies.
std::string checkpoint_in(const std::string& source);

}  // namespace mpt::app
