// MemoryPeak (see memory_peak.h). The CPU peak is VmHWM from /proc/self/status; writing 5 to
// /proc/self/clear_refs resets it to the current RSS (Linux 4.0 and later).
#include "device/memory_peak.h"

#include <fstream>
#include <string>

#ifdef MPT_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace mpt::hardware {
namespace {

int64_t status_kib(const std::string& field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind(field + ":", 0) == 0) return std::stoll(line.substr(field.size() + 1));
  return 0;
}

#ifdef MPT_WITH_CUDA
int64_t allocator_stat(bool peak) {
  const auto stat = c10::cuda::CUDACachingAllocator::getDeviceStats(c10::cuda::current_device()).allocated_bytes[0];
  return peak ? stat.peak : stat.current;
}
#endif

}  // namespace

MemoryPeak::MemoryPeak(torch::Device device) : device_(device) {
#ifdef MPT_WITH_CUDA
  if (device_.is_cuda()) baseline_ = allocator_stat(/*peak=*/false);
#endif
  if (device_.is_cpu()) baseline_ = status_kib("VmRSS") * 1024;
  reset_peak();
}

int64_t MemoryPeak::current_peak() const {
#ifdef MPT_WITH_CUDA
  if (device_.is_cuda()) return allocator_stat(/*peak=*/true);
#endif
  return status_kib("VmHWM") * 1024;
}

void MemoryPeak::reset_peak() {
#ifdef MPT_WITH_CUDA
  if (device_.is_cuda()) {
    c10::cuda::CUDACachingAllocator::resetPeakStats(c10::cuda::current_device());
    return;
  }
#endif
  std::ofstream("/proc/self/clear_refs") << "5";
}

void MemoryPeak::pause() {
  if (paused_) return;
  kept_ = std::max(kept_, current_peak());
  paused_ = true;
}

void MemoryPeak::resume() {
  if (!paused_) return;
  reset_peak();
  paused_ = false;
}

int64_t MemoryPeak::bytes() const {
  const int64_t peak = paused_ ? kept_ : std::max(kept_, current_peak());
  return std::max<int64_t>(0, peak - baseline_);
}

}  // namespace mpt::hardware
