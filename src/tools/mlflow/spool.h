// The spool: directories a tracking server did not take, each an entry file waiting for the next tracked mpt
// command. Every deliverable entry goes out: a server that does not answer holds back only its own entries, and
// an entry that cannot be read, that waited past kMaxSpoolAge, names a URI that can never work or is refused is
// moved aside into set-aside/ with a warning, never kept silently.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "tools/mlflow/delivery.h"

namespace mpt::mlflow {

inline constexpr std::chrono::hours kMaxSpoolAge{24 * 30};
inline constexpr const char* kSetAsideFolder = "set-aside";

using Say = std::function<void(const std::string&)>;

// One entry: what to deliver ("run", "comparison" or "night"), where, and since when.
struct SpoolEntry {
  std::string kind, dir;
  Target target;
  int64_t spooled_at_ms = 0;
};

// An entry file's text read back; nothing, and `problem` says why, when it is not one mpt wrote.
std::optional<SpoolEntry> read_spool_entry(const std::string& text, std::string& problem);

// Records `dir` for a later delivery (the entry file is the owner's alone: the URI may hold credentials).
void spool(const Target& target, const std::string& dir, const std::string& kind);

// Delivers what the spool holds, oldest first; returns the directories delivered. `warn` hears of every entry
// held back (with how long it has waited), dropped (its folder gone) or set aside.
int flush_spool(const std::string& spool_dir, const Say& warn);

// flush_spool, then one line to `info` counting what went out.
void deliver_spooled(const std::string& spool_dir, const Say& info, const Say& warn);

// For a command that ends with something to track: the spool first, then `dir`; when the server does not answer,
// `dir` is spooled. Never throws; `say` hears one line of what happened.
void deliver_or_spool(const Target& target, const std::string& dir, const std::string& kind, const Say& say);

}  // namespace mpt::mlflow
