// mpt's CUDA kernels as LibTorch ops, one folder per backend as ggml keeps them: each op says whether it supports
// a tensor (this build has the kernels, the tensor is on a GPU, its dtype and shape are the kernel's), so the op it
// serves dispatches per device: the kernel where supported, LibTorch's ops (the reference) everywhere else.
// Adding a kernel: its .cu file and launcher (ops/cuda/launchers.h), its op and supports check here, one case in
// the op it serves and one entry in tests/ops/test_device_ops.cpp.
#pragma once

#include <torch/torch.h>

#include "ops/mxfp8.h"

namespace mpt::ops::cuda {

// Whether nvcc compiled src/ops/cuda/*.cu into this build (CMake finds nvcc beside a CUDA LibTorch).
bool kernels_built();

// to_mxfp8 on a GPU in one pass: x on CUDA, FP32 or BF16, its last dimension a multiple of kMxBlock.
bool supports_to_mxfp8(const torch::Tensor& x);
MxTensor to_mxfp8(const torch::Tensor& x);

}  // namespace mpt::ops::cuda
