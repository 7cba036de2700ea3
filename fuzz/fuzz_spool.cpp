// The MLflow spool as the next tracked command reads it: the input is one entry file in a spool folder of its own.
// Reading it never throws; flushing the folder (this build has no libcurl, so every server is unreachable) holds the
// entry back, drops it or moves it aside with a warning, and never throws or leaves the spool unreadable.
#include <filesystem>

#include "fuzz/harness.h"
#include "tools/mlflow/spool.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::string problem;
  const auto entry = mpt::mlflow::read_spool_entry(text, problem);
  if (!entry && problem.empty()) std::abort();  // a refusal always says why
  const std::string spool = mpt::fuzz::scratch_folder("spool");
  mpt::fuzz::write_bytes(spool + "/entry.json", data, size);
  const int delivered = mpt::mlflow::flush_spool(spool, [](const std::string& line) {
    if (line.empty()) std::abort();
  });
  if (delivered != 0) std::abort();  // nothing can be delivered without a server
  std::filesystem::remove_all(spool);
  return 0;
}
