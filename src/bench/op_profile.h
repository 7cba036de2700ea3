// Where a step's time goes, op by op: LibTorch's (legacy, CPU) profiler around the timed steps, folded into
// self and total time per op name. Self time is an op's own time without the ops it called, so the self times
// of all ops add up to the step; total time includes its callees (an autograd node's total is its backward).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mpt::bench {

struct OpTime {
  std::string name;
  int64_t calls = 0;
  double self_ms = 0.0;
  double total_ms = 0.0;
};

// Records every op LibTorch runs on this thread between construction and finish().
class OpProfiler {
 public:
  OpProfiler();
  ~OpProfiler();
  OpProfiler(const OpProfiler&) = delete;
  OpProfiler& operator=(const OpProfiler&) = delete;

  // Stops recording; the ops by self time, largest first.
  std::vector<OpTime> finish();

 private:
  bool running_ = true;
};

}  // namespace mpt::bench
