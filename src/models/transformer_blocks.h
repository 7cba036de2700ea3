// Pieces every transformer family shares (BERT, ViT, Llama): the attention core with its FP32 softmax, heads split
// and merged, a LayerNorm run through its precision runner, and a decoder tied to the word embeddings.
#pragma once

#include <torch/torch.h>

#include "precision/policy.h"

namespace mpt::models {

// How the scores q k^T reach the FP32 softmax under mixed precision: as their GEMM rounds them to the compute dtype
// (BERT's attention, as its A/B was measured), or in FP32 from the same low-precision q and k, as PyTorch's fused
// attention kernels keep them (ViT's: rounded scores cost it accuracy, docs/usage.md). Identical in FP32 runs.
enum class Scores { kComputeDtype, kFp32 };

// softmax(q k^T / sqrt(d) + mask_bias) v with dropout `p` on the probabilities, for q, k, v (B, h, S, d): the
// scores as `scores` says, scaling, masking and the softmax always in FP32 (one fused pass on CPU,
// ops::attention_probabilities), the probabilities back in v's dtype for the second product. mask_bias
// (B, 1, 1, S) FP32: 0 where attended, a large negative number elsewhere.
torch::Tensor attention_core(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                             const torch::Tensor& mask_bias, double p, bool training,
                             Scores scores = Scores::kComputeDtype);

// (B, S, H) -> (B, h, S, H / h), and back.
torch::Tensor split_heads(const torch::Tensor& x, int64_t heads);
torch::Tensor merge_heads(const torch::Tensor& x);

// A LayerNorm through its runner: in FP32 when the policy keeps it there, otherwise in the input's dtype with the
// affine parameters cast to match (LayerNorm has no mixed-dtype kernel).
torch::Tensor layer_norm_through(const precision::ModuleRunner& runner, const torch::nn::LayerNorm& norm,
                                 const torch::Tensor& x);

// A head tied to the word embeddings E (V, H): h (N, H) -> h E^T + b (N, V), `bias` optional. Its gradient for E is
// a dense tensor of its own, into which a sparse lookup gradient is added in place (BERT's MLM decoder, tied decoders).
torch::Tensor tied_decoder(const torch::Tensor& h, const torch::Tensor& embedding, const torch::Tensor& bias = {});

}  // namespace mpt::models
