// The bytes CPU tensors hold, counted by a thin wrapper around LibTorch's CPU allocator: the CPU's counterpart of
// the CUDA caching allocator's "allocated bytes". The RSS cannot tell phases apart, since malloc (tcmalloc above
// all) keeps freed memory, so an evaluation's peak would stay in every later training peak.
#pragma once

#include <cstdint>

namespace mpt::hardware {

// Routes CPU tensor allocations through the counter from now on (idempotent). Tensors allocated before keep their
// own deleter and are never counted, so the count stays consistent.
void count_cpu_tensor_memory();

// Bytes of CPU tensor storage allocated through the counter and not yet freed (malloc's usable sizes).
int64_t cpu_tensor_bytes();
// The highest cpu_tensor_bytes() since the last reset.
int64_t cpu_tensor_peak_bytes();
void reset_cpu_tensor_peak();

}  // namespace mpt::hardware
