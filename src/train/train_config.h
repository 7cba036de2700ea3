// What the training loop takes from a spec's train, checkpoint, debug and distributed sections: cadences,
// clipping, accumulation and the rehearsals (injected overflows, stops, a dying rank). Plain values, so that the
// spec layer can fill it without the trainer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mpt::train {

struct TrainConfig {
  int64_t total_steps = 1;
  int64_t log_every_steps = 50;
  int64_t eval_every_steps = 0;  // 0: only at the end
  double grad_clip_norm = 0.0;   // 0: off
  int64_t grad_accum_steps = 1;
  int64_t checkpoint_every_steps = 500;  // 0: only at the end
  int64_t max_consecutive_skips = 100;
  int64_t eval_batch_size = 1000;
  std::vector<int64_t> inject_nonfinite_grad_at;
  std::string inject_nonfinite_param;  // "" = the first parameter
  int64_t inject_nonfinite_rank = -1;  // data parallelism: only this rank injects (-1 = every rank)
  int64_t die_at_step = 0;             // data parallelism rehearsal: the last rank dies abruptly here (0 = off)
  double bucket_mb = 25.0;             // gradient all-reduce bucket size
  int64_t stop_after_steps = 0;        // 0: off
  bool forbid_host_syncs = false;      // on a GPU, any host sync in a step but the overflow check is an error
  double slow_down = 0.0;              // debug: sleep this fraction of each step's time (a planted slowdown)
};

}  // namespace mpt::train
