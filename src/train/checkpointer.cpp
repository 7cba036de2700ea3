// See checkpointer.h.
#include "train/checkpointer.h"

#include "ops/optimizer_state.h"

namespace mpt::train {

Checkpointer::Checkpointer(const CheckpointConfig& config, io::CheckpointStore* store, std::string folder,
                           EventLog& events, hardware::MemoryPeaks* memory, LoggedAcrossResume* logged)
    : config_(config), store_(store), folder_(std::move(folder)), events_(events), memory_(memory), logged_(logged) {}

void Checkpointer::maybe_save(TrainStep& step, int64_t total_steps) {
  const int64_t done = step.state().step;
  if ((config_.every_steps > 0 && done % config_.every_steps == 0) || done == total_steps) save(step);
}

void Checkpointer::save(TrainStep& step) {
  const hardware::MemoryPhaseScope phase(memory_, hardware::MemoryPhase::kCheckpoint);
  io::TrainingState state = step.state();
  state.rng_state = at::detail::getDefaultCPUGenerator().get_state();
  if (logged_) state.logging = logged_->logging_state(step);  // every rank: it may be collective
  const std::string path = io::CheckpointStore::path_in(folder_, state.step);
  const io::ModelTensors tensors = step.checkpoint_tensors();
  const std::optional<io::ShardedMasters> sharded = step.update_path().write_pieces(path, tensors.parameters.keys());
  if (!store_) return;
  const std::string saved = sharded
                                ? store_->save_sharded(tensors, ops::optimizer_kind(step.optimizer()), state, *sharded)
                                : store_->save(tensors, step.optimizer(), state);
  events_.checkpoint_saved(state.step, saved);
}

void Checkpointer::resume(TrainStep& step, const std::string& path) {
  const io::ModelTensors tensors = step.checkpoint_tensors();
  const io::TrainingState state = io::load_checkpoint(
      path, tensors, step.optimizer(), [&](const auto& saved) { return step.recipe().check_state(saved); });
  step.update_path().after_load();  // the whole state is loaded: under ZeRO-1, cut into this rank's pieces next
  if (const auto resharded = step.restore(state)) events_.data_resharded(state.step, state.data, *resharded);
  if (logged_) logged_->restore_logging(state.logging, step);
  events_.resumed(state.step, path);
  resumed_from_ = path;
}

}  // namespace mpt::train
