// The spec's train, checkpoint and debug sections, one struct each, as plain values the spec layer fills.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mpt::train {

struct TrainConfig {
  int64_t epochs = 10;
  int64_t max_steps = 0;  // > 0: overrides epochs
  int64_t log_every_steps = 50;
  int64_t eval_every_steps = 0;  // 0: at the end of each epoch
  int64_t eval_batch_size = 1000;
  double grad_clip_norm = 0.0;  // 0: off
  int64_t grad_accum_steps = 1;
  int64_t max_consecutive_skips = 100;
  std::string progress = "auto";  // auto | bar | plain
  int64_t total_steps = 1;        // not a key: from epochs or max_steps, filled by the run's wiring
};

struct CheckpointConfig {
  int64_t every_steps = 500;  // 0: only at the end
  int64_t keep_last = 3;
};

// Rehearsals of what goes wrong in real runs, and checks that cost time (train/rehearsal.h).
struct DebugConfig {
  bool check_numerics = false;
  std::vector<int64_t> inject_nonfinite_grad_at;
  std::string inject_nonfinite_param;  // "" = the first parameter
  int64_t stop_after_steps = 0;        // 0: off
  int64_t inject_nonfinite_rank = -1;  // data parallelism: only this rank injects (-1 = every rank)
  int64_t die_at_step = 0;             // data parallelism: the last rank dies abruptly here (0 = off)
  double slow_down = 0.0;              // sleep this fraction of each step's time (a planted slowdown)
  bool forbid_host_syncs = false;      // on a GPU, any host sync in a step but the overflow check is an error
};

}  // namespace mpt::train
