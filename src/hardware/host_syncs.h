// Host syncs on a GPU. An operation that makes the host wait for the device (item(), nonzero(), a blocking
// copy, a stream or device synchronisation) drains the queue of kernels the host keeps ahead of a GPU; a training
// step should have exactly one, on purpose: reading the overflow flag that decides whether the step is skipped.
// debug.forbid_host_syncs proves it. For the step, c10's sync debug mode is set to "error", so any other sync
// throws where it happens; the deliberate ones run inside an AllowHostSyncs scope. Without a CUDA build, and when
// not enabled, both are no-ops.
#pragma once

namespace mpt {

class ForbidHostSyncs {
 public:
  explicit ForbidHostSyncs(bool enabled);
  ~ForbidHostSyncs();
  ForbidHostSyncs(const ForbidHostSyncs&) = delete;
  ForbidHostSyncs& operator=(const ForbidHostSyncs&) = delete;

 private:
  bool enabled_;
  int previous_ = 0;  // c10::cuda::SyncDebugMode
};

// Lifts a ForbidHostSyncs for one deliberate sync (or a rare one: an epoch's end, a skipped step's diagnosis).
class AllowHostSyncs {
 public:
  AllowHostSyncs();
  ~AllowHostSyncs();
  AllowHostSyncs(const AllowHostSyncs&) = delete;
  AllowHostSyncs& operator=(const AllowHostSyncs&) = delete;

 private:
  int previous_ = 0;
};

// Whether a sync was refused (the text of the c10::Error a ForbidHostSyncs makes LibTorch throw).
bool is_forbidden_sync_error(const char* what);

}  // namespace mpt
