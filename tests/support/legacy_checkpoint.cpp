// See legacy_checkpoint.h: "MPTCKPT\n" | u32 version 1 | u32 crc32(payload) | u64 payload length | payload |
// "MPTDONE\n", the payload a torch::serialize archive.
#include "tests/support/legacy_checkpoint.h"

#include <zlib.h>

#include <sstream>

#include "common/files.h"

namespace mpt::testing {
namespace {

template <typename T>
void put(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(T));
}

}  // namespace

void save_first_format_checkpoint(const std::string& path, const io::ModelTensors& model,
                                  torch::optim::Optimizer& optimizer, const io::TrainingState& state) {
  torch::serialize::OutputArchive archive;
  for (const auto& item : model.parameters) archive.write("model." + item.key(), item.value().detach().cpu());
  for (const auto& item : model.buffers) archive.write("model." + item.key(), item.value().cpu(), true);
  torch::serialize::OutputArchive optimizer_archive;
  optimizer.save(optimizer_archive);
  archive.write("optimizer", optimizer_archive);
  for (const auto& [name, value] : {std::pair{"state.step", state.step},
                                    {"state.applied_steps", state.applied_steps},
                                    {"state.skipped_steps", state.skipped_steps},
                                    {"state.data_epoch", state.data.epoch},
                                    {"state.data_batch", state.data.batch},
                                    {"state.data_batch_samples", state.data.batch_samples},
                                    {"scaler.growth_tracker", state.scaler.growth_tracker},
                                    {"scaler.backoffs", state.scaler.backoffs},
                                    {"scaler.growths", state.scaler.growths},
                                    {"scaler.hysteresis_left", state.scaler.hysteresis_left},
                                    {"scaler.overflows_at_min", state.scaler.overflows_at_min}})
    archive.write(name, value);
  archive.write("scaler.scale", state.scaler.scale);
  archive.write("scaler.lowest_scale", state.scaler.lowest_scale);
  archive.write("rng.cpu", state.rng_state);
  for (const auto& item : state.logging) archive.write("logging." + item.key(), item.value().detach().cpu());
  std::ostringstream payload_stream;
  archive.save_to(payload_stream);
  const std::string payload = payload_stream.str();
  std::string bytes = "MPTCKPT\n";
  put<uint32_t>(bytes, 1);
  put<uint32_t>(bytes, static_cast<uint32_t>(crc32(0L, reinterpret_cast<const Bytef*>(payload.data()),
                                                   static_cast<uInt>(payload.size()))));
  put<uint64_t>(bytes, payload.size());
  bytes += payload + "MPTDONE\n";
  write_file_atomically(path, bytes);
}

}  // namespace mpt::testing
