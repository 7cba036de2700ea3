// See checkpointer.h.
#include "train/checkpointer.h"

namespace mpt::train {

Checkpointer::Checkpointer(const CheckpointConfig& config, io::CheckpointStore* store, EventLog& events,
                           hardware::MemoryPeaks* memory, LoggedAcrossResume* logged)
    : config_(config), store_(store), events_(events), memory_(memory), logged_(logged) {}

void Checkpointer::maybe_save(TrainStep& step, int64_t total_steps) {
  const int64_t done = step.state().step;
  if ((config_.every_steps > 0 && done % config_.every_steps == 0) || done == total_steps) save(step);
}

void Checkpointer::save(TrainStep& step) {
  const hardware::MemoryPhaseScope phase(memory_, hardware::MemoryPhase::kCheckpoint);
  step.update_path().gather_whole_state();  // every rank, saving or not: a sharded optimizer's state is collective
  io::NamedTensors logging = logged_ ? logged_->logging_state(step) : io::NamedTensors();
  if (store_) {
    io::TrainingState state = step.state();
    state.rng_state = at::detail::getDefaultCPUGenerator().get_state();
    state.logging = std::move(logging);
    events_.checkpoint_saved(state.step, store_->save(step.checkpoint_tensors(), step.optimizer(), state));
  }
  step.update_path().after_save();
}

void Checkpointer::resume(TrainStep& step, const std::string& path) {
  step.update_path().gather_whole_state();  // a no-op before the first step, when runs resume
  const io::ModelTensors tensors = step.checkpoint_tensors();
  const io::TrainingState state = io::load_checkpoint(
      path, tensors, step.optimizer(), [&](const auto& saved) { return step.recipe().check_state(saved); });
  step.update_path().after_load();  // the file holds the whole state: this rank's pieces of it
  if (const auto resharded = step.restore(state)) events_.data_resharded(state.step, state.data, *resharded);
  if (logged_) logged_->restore_logging(state.logging, step);
  events_.resumed(state.step, path);
  resumed_from_ = path;
}

}  // namespace mpt::train
