// BF16 autocast on a CPU whose LibTorch has no fast BF16 GEMM (no AVX-512: ATen then multiplies BF16 in a scalar
// loop, far slower than FP32; docs/findings.md). There the GEMM-class ops autocast runs in BF16 (linear,
// convolutions, mm, bmm, matmul, addmm, baddbmm) are emulated with BF16's numerics: inputs rounded to BF16,
// the product in FP32 (what a native BF16 GEMM accumulates in), the output rounded to BF16. Everything else
// is autocast's as usual.
#pragma once

namespace mpt::ops {

// Whether this CPU's LibTorch multiplies BF16 natively (oneDNN's BF16 path: AVX-512 and up).
bool cpu_has_fast_bf16_gemm();

// Installs the emulation for CPU autocast once, where cpu_has_fast_bf16_gemm() is false; returns whether it is
// on. MPT_BF16_EMULATION=1 forces it on, =0 off (the tests run both ways).
bool enable_cpu_bf16_emulation();

}  // namespace mpt::ops
