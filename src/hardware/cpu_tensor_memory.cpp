// The counting CPU allocator (see cpu_tensor_memory.h). Its DataPtrs stay simple (the context is the data, as
// LibTorch's own), so raw_allocate and copy-on-write storage keep working; sizes come from malloc_usable_size.
#include "hardware/cpu_tensor_memory.h"

#include <c10/core/CPUAllocator.h>
#include <malloc.h>

#include <atomic>
#include <mutex>

namespace mpt::hardware {
namespace {

std::atomic<int64_t> current_bytes{0};
std::atomic<int64_t> peak_bytes{0};
c10::DeleterFnPtr inner_deleter = nullptr;

void add(int64_t bytes) {
  const int64_t now = current_bytes.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  int64_t peak = peak_bytes.load(std::memory_order_relaxed);
  while (now > peak && !peak_bytes.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

void counted_delete(void* data) {
  current_bytes.fetch_sub(static_cast<int64_t>(::malloc_usable_size(data)), std::memory_order_relaxed);
  inner_deleter(data);
}

class CountingAllocator final : public c10::Allocator {
 public:
  explicit CountingAllocator(c10::Allocator* inner) : inner_(inner) {}

  c10::DataPtr allocate(size_t bytes) override {
    c10::DataPtr data = inner_->allocate(bytes);
    void* pointer = data.get();
    // Only what the default allocator made in its usual form is ours to count and free.
    if (!pointer || data.get_context() != pointer || data.get_deleter() != inner_deleter) return data;
    const c10::Device device = data.device();
    data.release_context();
    add(static_cast<int64_t>(::malloc_usable_size(pointer)));
    return {pointer, pointer, &counted_delete, device};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &counted_delete; }

  void copy_data(void* dest, const void* src, std::size_t count) const override { default_copy_data(dest, src, count); }

 private:
  c10::Allocator* inner_;
};

}  // namespace

void count_cpu_tensor_memory() {
  static std::once_flag installed;
  std::call_once(installed, [] {
    c10::Allocator* inner = c10::GetDefaultCPUAllocator();
    inner_deleter = inner->raw_deleter();
    if (!inner_deleter) return;  // an allocator whose frees we could not forward: leave it alone
    static CountingAllocator counting(inner);
    c10::SetCPUAllocator(&counting, /*priority=*/1);
  });
}

int64_t cpu_tensor_bytes() { return current_bytes.load(std::memory_order_relaxed); }
int64_t cpu_tensor_peak_bytes() { return peak_bytes.load(std::memory_order_relaxed); }
void reset_cpu_tensor_peak() {
  peak_bytes.store(current_bytes.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

}  // namespace mpt::hardware
