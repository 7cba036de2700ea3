// Weight files users exchange with PyTorch: safetensors (own implementation of the format) and PyTorch's zip
// format (torch.save / torch.load, through LibTorch's pickler), both as flat name -> tensor maps with
// torchvision / Hugging Face names; and loading such a map into a model for `model.init_from`.
#pragma once

#include <torch/torch.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace mpt::io {

using NamedTensorList = std::vector<std::pair<std::string, torch::Tensor>>;

// safetensors: u64 header length (LE) | JSON header, space-padded to a multiple of 8 | tensor bytes, packed in
// header order. `metadata` goes to "__metadata__" (string -> string).
std::string encode_safetensors(const NamedTensorList& tensors, const std::map<std::string, std::string>& metadata = {});
// Validates everything (length, JSON, dtypes, shapes, offsets: in bounds, no holes, no overlaps) and throws
// mpt::Error naming `source`, the tensor and the byte offset or field that is wrong.
NamedTensorList decode_safetensors(const std::string& bytes, const std::string& source);

// Reads a weights file by content: safetensors, PyTorch zip, or an mpt checkpoint's model tensors; a folder (a
// Hugging Face model's) by the weights file in it (weights_file_in).
NamedTensorList read_weights(const std::string& path);
// `path` itself, or for a folder its model.safetensors, else its pytorch_model.bin; empty for a folder with neither.
std::string weights_file_in(const std::string& path);
constexpr const char* kNoWeightsInFolder =
    "a folder without model.safetensors or pytorch_model.bin (what a Hugging Face model folder holds)";
// Writes `tensors` atomically in `format` ("safetensors" or "torch").
void write_weights(const std::string& path, const NamedTensorList& tensors, const std::string& format);

struct InitReport {
  int64_t loaded = 0;
  std::vector<std::string> fresh;    // model tensors the file lacks: they keep their initialisation (a new head)
  std::vector<std::string> unused;   // file tensors the model has no place for (a pre-training head)
  std::vector<std::string> skipped;  // model tensors model.init_skip keeps at their initialisation
  std::vector<std::string> unmatched_skips;  // model.init_skip globs that match no model tensor (a typo?)
};

// "loaded 320 tensors; 2 kept their initialisation (fc.weight, fc.bias); 0 unused" for logs.
std::string describe(const InitReport& report);

// Copies every file tensor whose name matches a model parameter or buffer into it (cast to the model's dtype).
// With a `base_prefix` (the model family's Hugging Face base_model_prefix, "bert"), a file of the base model alone
// ("embeddings.*") matches the model's "bert.embeddings.*"; the prefixes DDP ("module.") and torch.compile
// ("_orig_mod.") put on names are dropped. Model tensors matching a glob of `skip` keep their initialisation (a
// head of another size). A shape mismatch, or no match at all, is an error naming the file and tensor; so is a
// model.init_skip that takes every tensor the file could have loaded.
InitReport init_from_weights(torch::nn::Module& model, const NamedTensorList& tensors, const std::string& source,
                             const std::vector<std::string>& skip = {}, const std::string& base_prefix = "");

}  // namespace mpt::io
