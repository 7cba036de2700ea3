// MemoryPeaks (see memory_peak.h). The phases count tensor bytes (hardware/cpu_tensor_memory.h on the CPU, the
// caching allocator's allocated bytes on CUDA) and resident memory (VmHWM from /proc/self/status, reset at each
// phase's start); the process peak is the highest VmHWM of all phases, or the allocator's highest peak on CUDA.
#include "hardware/memory_peak.h"

#include <algorithm>
#include <fstream>
#include <string>

#include "hardware/cpu_tensor_memory.h"

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

// Sets VmHWM back to the current RSS (Linux 4.0 and later); false when the kernel or a sandbox refuses.
bool reset_resident_peak() {
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";
  clear.flush();
  return static_cast<bool>(clear);
}

}  // namespace

MemoryPeaks::MemoryPeaks(torch::Device device) : device_(device) {
  resident_process_ = status_kib("VmHWM") * 1024;  // what start-up and the datasets took, before the first reset
  resets_ = reset_resident_peak();
#ifdef MPT_WITH_CUDA
  if (device_.is_cuda()) {
    baseline_ = allocator_stat(/*peak=*/false);
    process_ = allocator_stat(/*peak=*/true);
  }
#endif
  if (!device_.is_cuda()) {
    count_cpu_tensor_memory();
    baseline_ = cpu_tensor_bytes();
  }
  reset_peak();
}

int64_t MemoryPeaks::current_peak() const {
#ifdef MPT_WITH_CUDA
  if (device_.is_cuda()) return allocator_stat(/*peak=*/true);
#endif
  return cpu_tensor_peak_bytes();
}

void MemoryPeaks::reset_peak() {
#ifdef MPT_WITH_CUDA
  if (device_.is_cuda()) {
    c10::cuda::CUDACachingAllocator::resetPeakStats(c10::cuda::current_device());
    return;
  }
#endif
  reset_cpu_tensor_peak();
}

void MemoryPeaks::enter(MemoryPhase phase) {
  if (phase == phase_) return;
  int64_t& kept = kept_[static_cast<size_t>(phase_)];
  kept = std::max(kept, current_peak());
  if (device_.is_cuda()) process_ = std::max(process_, kept);
  reset_peak();
  const int64_t resident = status_kib("VmHWM") * 1024;
  resident_[static_cast<size_t>(phase_)] = std::max(resident_[static_cast<size_t>(phase_)], resident);
  resident_process_ = std::max(resident_process_, resident);
  if (resets_) resets_ = reset_resident_peak();
  phase_ = phase;
}

int64_t MemoryPeaks::resident_bytes(MemoryPhase phase) const {
  if (!resets_) return -1;
  const int64_t kept = resident_[static_cast<size_t>(phase)];
  return phase == phase_ ? std::max(kept, status_kib("VmHWM") * 1024) : kept;
}

int64_t MemoryPeaks::bytes(MemoryPhase phase) const {
  int64_t peak = kept_[static_cast<size_t>(phase)];
  if (phase == phase_) peak = std::max(peak, current_peak());
  return std::max<int64_t>(0, peak - baseline_);
}

int64_t MemoryPeaks::process_bytes() const {
  if (device_.is_cuda()) return std::max(process_, current_peak());
  return std::max(resident_process_, status_kib("VmHWM") * 1024);
}

std::string MemoryPeaks::kind() const { return device_.is_cuda() ? "CUDA allocator" : "CPU tensors"; }

}  // namespace mpt::hardware
