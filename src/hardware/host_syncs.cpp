#include "hardware/host_syncs.h"

#include <cstring>

#ifdef MPT_WITH_CUDA
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace mpt {
namespace {

#ifdef MPT_WITH_CUDA
int swap_mode(int mode) {
  auto& state = c10::cuda::warning_state();
  const int previous = static_cast<int>(state.get_sync_debug_mode());
  state.set_sync_debug_mode(static_cast<c10::cuda::SyncDebugMode>(mode));
  return previous;
}
constexpr int kDisabled = static_cast<int>(c10::cuda::SyncDebugMode::L_DISABLED);
constexpr int kError = static_cast<int>(c10::cuda::SyncDebugMode::L_ERROR);
#else
int swap_mode(int) { return 0; }
constexpr int kDisabled = 0;
constexpr int kError = 0;
#endif

}  // namespace

ForbidHostSyncs::ForbidHostSyncs(bool enabled) : enabled_(enabled) {
  if (enabled_) previous_ = swap_mode(kError);
}
ForbidHostSyncs::~ForbidHostSyncs() {
  if (enabled_) swap_mode(previous_);
}

AllowHostSyncs::AllowHostSyncs() : previous_(swap_mode(kDisabled)) {}
AllowHostSyncs::~AllowHostSyncs() { swap_mode(previous_); }

bool is_forbidden_sync_error(const char* what) {
  return std::strstr(what, "called a synchronizing CUDA operation") != nullptr;
}

}  // namespace mpt
