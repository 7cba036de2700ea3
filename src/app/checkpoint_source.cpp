// Checkpoint sources (see checkpoint_source.h).
#include "app/checkpoint_source.h"

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <vector>

#include "common/error.h"
#include "io/checkpoint.h"

namespace mpt::app {

std::string checkpoint_in(const std::string& source) {
  if (std::filesystem::is_regular_file(source)) return source;
  if (!std::filesystem::is_directory(source)) throw UsageError(source + ": no such checkpoint or run directory");
  const std::string folder = source + "/checkpoints";
  if (!std::filesystem::is_directory(folder)) throw UsageError(source + ": not a run directory (no checkpoints/)");
  std::vector<std::string> candidates;
  for (const auto& entry : std::filesystem::directory_iterator(folder))
    if (entry.path().extension() == ".mpt") candidates.push_back(entry.path().string());
  std::sort(candidates.rbegin(), candidates.rend());  // step-numbered names: newest first
  for (const auto& candidate : candidates) {
    const std::string why = io::verify_checkpoint(candidate);
    if (why.empty()) return candidate;
    std::cerr << "mpt: skipping " << candidate << ": " << why << "\n";
  }
  throw Error(folder + ": no valid checkpoint");
}

}  // namespace mpt::app
