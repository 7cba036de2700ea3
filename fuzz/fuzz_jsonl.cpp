// Run-directory JSON and JSONL (metrics.jsonl, events.jsonl, summary.json, night.json) as mpt reads them back.
#include "common/files.h"
#include "common/json.h"
#include "fuzz/harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = mpt::fuzz::scratch_file(data, size, "records.jsonl");
  mpt::fuzz::refusals_only([&] { mpt::read_jsonl_records(path); });
  const nlohmann::json value = mpt::parse_json(std::string(reinterpret_cast<const char*>(data), size));
  if (!value.is_discarded()) (void)value.dump();  // a document that parses must also print
  return 0;
}
