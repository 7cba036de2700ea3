#include "bench/op_profile.h"

#include <torch/csrc/autograd/profiler_legacy.h>

#include <algorithm>
#include <map>

namespace mpt::bench {
namespace {

namespace profiler = torch::autograd::profiler;

struct OpenRange {
  const profiler::LegacyEvent* push;
  double child_us = 0.0;
};

}  // namespace

OpProfiler::OpProfiler() {
  profiler::enableProfilerLegacy(torch::profiler::impl::ProfilerConfig(torch::profiler::impl::ProfilerState::CPU));
}

OpProfiler::~OpProfiler() {
  if (running_) profiler::disableProfilerLegacy();
}

std::vector<OpTime> OpProfiler::finish() {
  running_ = false;
  const profiler::thread_event_lists threads = profiler::disableProfilerLegacy();
  std::map<std::string, OpTime> by_name;
  for (const auto& events : threads) {
    // Ranges nest within a thread, so a stack pairs each pop with its push and charges the child's time to it.
    std::vector<OpenRange> open;
    for (const profiler::LegacyEvent& event : events) {
      if (event.kind() == profiler::EventKind::PushRange) {
        open.push_back({&event});
      } else if (event.kind() == profiler::EventKind::PopRange && !open.empty()) {
        const OpenRange range = open.back();
        open.pop_back();
        const double elapsed_us = range.push->cpuElapsedUs(event);
        OpTime& op = by_name[range.push->name()];
        op.calls += 1;
        op.total_ms += elapsed_us / 1000.0;
        op.self_ms += (elapsed_us - range.child_us) / 1000.0;
        if (!open.empty()) open.back().child_us += elapsed_us;
      }
    }
  }
  std::vector<OpTime> ops;
  for (auto& [name, op] : by_name) {
    op.name = name;
    ops.push_back(op);
  }
  std::sort(ops.begin(), ops.end(), [](const OpTime& a, const OpTime& b) { return a.self_ms > b.self_ms; });
  return ops;
}

}  // namespace mpt::bench
