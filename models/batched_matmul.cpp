// Batched FP32 matmul with the batch shared among the threads. Bt = product of the batch dimensions.
#include "models/batched_matmul.h"

#include <ATen/Parallel.h>
#include <dlfcn.h>

#include <vector>

#include "core/precision/autocast.h"

namespace mpt::models {
namespace {

// CBLAS, found at run time like the other BLAS entry points mpt reads (core/common/hardware.cpp): the BLAS
// LibTorch loaded (OpenBLAS here) exports it; a LibTorch with a private BLAS does not, and then ATen's bmm runs.
// The OpenMP OpenBLAS runs one thread when called inside a parallel region, which is what the split wants.
enum CblasConstant { kRowMajor = 101, kNoTrans = 111, kTrans = 112 };
using CblasSgemm = void (*)(int order, int trans_a, int trans_b, int m, int n, int k, float alpha, const float* a,
                            int lda, const float* b, int ldb, float beta, float* c, int ldc);

CblasSgemm cblas_sgemm() {
  static const auto sgemm = reinterpret_cast<CblasSgemm>(dlsym(RTLD_DEFAULT, "cblas_sgemm"));
  return sgemm;
}

// One operand as BLAS reads each batch entry's (rows, cols) matrix: its data at `offsets[i]`, row-major with
// leading dimension `ld`, transposed when its columns are the unit-stride dimension's neighbours.
struct Operand {
  const float* data;
  std::vector<int64_t> offsets;  // per batch entry, in elements
  int trans;
  int64_t ld;
};

// Reads `t` in place when one of its last two dimensions has unit stride, else from a contiguous copy. `keep`
// holds that copy alive.
Operand operand(const torch::Tensor& t_in, torch::Tensor& keep) {
  const int64_t rows = t_in.size(-2), cols = t_in.size(-1);
  const int64_t row_stride = t_in.stride(-2), col_stride = t_in.stride(-1);
  const bool row_major = (col_stride == 1 || cols == 1) && row_stride >= std::max<int64_t>(cols, 1);
  const bool col_major = (row_stride == 1 || rows == 1) && col_stride >= std::max<int64_t>(rows, 1);
  keep = row_major || col_major ? t_in : t_in.contiguous();
  const bool transposed = !row_major && col_major;  // a copy is row-major
  Operand op{keep.data_ptr<float>(), {}, transposed ? kTrans : kNoTrans,
             transposed ? keep.stride(-1) : keep.stride(-2)};
  // Offsets of every batch entry, the batch dimensions walked like an odometer.
  const int64_t batch_dims = keep.dim() - 2;
  std::vector<int64_t> index(batch_dims, 0);
  int64_t entries = 1;
  for (int64_t d = 0; d < batch_dims; ++d) entries *= keep.size(d);
  op.offsets.reserve(entries);
  for (int64_t e = 0; e < entries; ++e) {
    int64_t offset = 0;
    for (int64_t d = 0; d < batch_dims; ++d) offset += index[d] * keep.stride(d);
    op.offsets.push_back(offset);
    for (int64_t d = batch_dims - 1; d >= 0 && ++index[d] == keep.size(d); --d) index[d] = 0;
  }
  return op;
}

// (..., M, K) @ (..., K, N) -> a fresh contiguous (..., M, N), the Bt products shared among the threads. Records
// no history: the operands are detached (the backward is not itself differentiable).
torch::Tensor split_bmm(const torch::Tensor& a_in, const torch::Tensor& b_in) {
  torch::Tensor a_keep, b_keep;
  const Operand a = operand(a_in.detach(), a_keep), b = operand(b_in.detach(), b_keep);
  const int64_t m = a_in.size(-2), k = a_in.size(-1), n = b_in.size(-1);
  std::vector<int64_t> shape = a_in.sizes().vec();
  shape.back() = n;
  torch::Tensor out = torch::empty(shape, a_in.options());
  float* c = out.data_ptr<float>();
  const CblasSgemm sgemm = cblas_sgemm();
  const auto entries = static_cast<int64_t>(a.offsets.size());
  at::parallel_for(0, entries, 1, [&](int64_t first, int64_t last) {
    for (int64_t e = first; e < last; ++e)
      sgemm(kRowMajor, a.trans, b.trans, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), 1.0f,
            a.data + a.offsets[e], static_cast<int>(a.ld), b.data + b.offsets[e], static_cast<int>(b.ld), 0.0f,
            c + e * m * n, static_cast<int>(n));
  });
  return out;
}

struct SplitBatchedMatmulFunction : public torch::autograd::Function<SplitBatchedMatmulFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& a, const torch::Tensor& b) {
    ctx->save_for_backward({a, b});
    return split_bmm(a, b);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& a = saved[0];  // (..., M, K)
    const torch::Tensor& b = saved[1];  // (..., K, N)
    const torch::Tensor& grad = grad_outputs[0];  // (..., M, N)
    return {ctx->needs_input_grad(0) ? split_bmm(grad, b.transpose(-2, -1)) : torch::Tensor(),   // (..., M, K)
            ctx->needs_input_grad(1) ? split_bmm(a.transpose(-2, -1), grad) : torch::Tensor()};  // (..., K, N)
  }
};

}  // namespace

bool splits_batched_matmul(const torch::Tensor& a, const torch::Tensor& b) {
#ifdef _OPENMP  // without it at::parallel_for in this file runs the products one after the other
  if (!a.device().is_cpu() || !b.device().is_cpu() || a.scalar_type() != torch::kFloat ||
      b.scalar_type() != torch::kFloat || precision::autocast_enabled(torch::kCPU))
    return false;
  if (a.dim() < 3 || a.dim() != b.dim() || a.size(-1) != b.size(-2) || a.numel() == 0 || b.numel() == 0)
    return false;
  int64_t entries = 1;
  for (int64_t d = 0; d < a.dim() - 2; ++d) {
    if (a.size(d) != b.size(d)) return false;  // broadcasting stays ATen's
    entries *= a.size(d);
  }
  const int64_t threads = at::get_num_threads();
  constexpr int64_t kIntMax = 2147483647;  // CBLAS takes int sizes and leading dimensions
  return threads > 1 && !at::in_parallel_region() && entries >= threads && cblas_sgemm() != nullptr &&
         a.numel() < kIntMax && b.numel() < kIntMax && a.size(-2) * b.size(-1) < kIntMax;
#else
  (void)a, (void)b;
  return false;
#endif
}

torch::Tensor batched_matmul(const torch::Tensor& a, const torch::Tensor& b) {
  if (!splits_batched_matmul(a, b)) return torch::matmul(a, b);
  if (!torch::GradMode::is_enabled() || !(a.requires_grad() || b.requires_grad())) return split_bmm(a, b);
  return SplitBatchedMatmulFunction::apply(a, b);
}

}  // namespace mpt::models
