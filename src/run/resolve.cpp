// config::Spec resolution: every decision "auto" stands for is made here once, recorded with its reason as the
// value's origin, and written to the run directory's config.yaml.
#include "run/resolve.h"

#include <filesystem>

#include "common/error.h"
#include "common/files.h"
#include "config/load.h"
#include "data/dataset.h"
#include "device/hardware.h"

namespace mpt::run {
namespace {

std::string at(const config::Spec& spec, const std::string& key) { return spec.origin(key) + ": " + key; }

}  // namespace

HardwareFacts probe_hardware() {
  return {hardware::cuda_available(), hardware::cuda_compute_capability(), hardware::cpu_has_native_bf16()};
}

MixedChoice choose_mixed(const std::string& device, const HardwareFacts& hardware) {
  if (device == "cuda") {
    const std::string capability = std::to_string(hardware.cuda_capability / 10) + "." +
                                   std::to_string(hardware.cuda_capability % 10);
    if (hardware.cuda_capability >= 80) return {"mixed_bf16", "CUDA compute capability " + capability + " has BF16"};
    return {"mixed_fp16", "CUDA compute capability " + capability + " (< 8.0) has FP16 Tensor Cores only"};
  }
  if (hardware.cpu_native_bf16) return {"mixed_bf16", "this CPU has AVX512-BF16/AMX"};
  // FP16 needs CUDA; BF16 without native instructions still trains with BF16's numerics, only not faster.
  return {"mixed_bf16", "this CPU has no native BF16 (AVX512-BF16/AMX): BF16 is emulated, with BF16's numerics "
                        "but slower than fp32 here"};
}

void resolve_spec(config::Spec& spec, const HardwareFacts& hardware) {
  std::vector<std::string> problems;

  std::string device = spec.get_string("device.type");
  if (device == "auto") {
    device = hardware.cuda_available ? "cuda" : "cpu";
    spec.set("device.type", YAML::Node(device), hardware.cuda_available ? "auto: CUDA available" : "auto: no CUDA");
  } else if (device == "cuda" && !hardware.cuda_available) {
    problems.push_back(at(spec, "device.type") + " = cuda, but this build or machine has no CUDA device; use cpu or auto");
  }

  const std::string backend = spec.get_string("distributed.backend");
  if (backend == "auto") {
    const bool cuda = device == "cuda";
    spec.set("distributed.backend", YAML::Node(cuda ? "nccl" : "gloo"), cuda ? "auto: CUDA tensors" : "auto: CPU tensors");
  } else if (backend == "nccl" && device != "cuda") {
    problems.push_back(at(spec, "distributed.backend") + " = nccl needs device.type cuda (NCCL moves CUDA tensors); "
                       "use gloo or auto on CPU");
  }

  std::string mode = spec.get_string("precision.mode");
  if (mode == "mixed") {
    const MixedChoice choice = choose_mixed(device, hardware);
    spec.set("precision.mode", YAML::Node(choice.mode), "mixed: " + choice.reason);
    mode = choice.mode;
  } else if (mode == "mixed_fp16" && device != "cuda") {
    problems.push_back(at(spec, "precision.mode") +
                       " = mixed_fp16 needs device.type cuda: LibTorch has no FP16 GEMM/conv on CPU; use mixed_bf16");
  }

  if (spec.get_string("precision.strategy") == "auto") {
    // On the CPU the fused optimizer reads the BF16 gradients and writes the BF16 weights as it steps the FP32
    // masters, which saves autocast's per-step weight casts and gave ResNet-50 a larger BF16 speed-up over FP32
    // (docs/findings.md); on a GPU the masters would take separate copy passes.
    const bool masters = mode != "fp32" && device == "cpu";
    spec.set("precision.strategy", YAML::Node(masters ? "master_weights" : "autocast"),
             masters           ? "auto: mixed precision on the CPU (one-pass master update)"
             : mode == "fp32" ? "auto: FP32 has no low-precision weights"
                               : "auto: on a GPU the master copies would be separate passes");
  }
  if (spec.get_string("precision.strategy") == "master_weights" && mode == "fp32")
    problems.push_back(at(spec, "precision.strategy") +
                       " = master_weights keeps FP32 masters of low-precision weights; it needs a mixed precision.mode");

  if (spec.get_string("precision.loss_scale.mode") == "auto") {
    const bool fp16 = mode == "mixed_fp16";
    spec.set("precision.loss_scale.mode", YAML::Node(fp16 ? "dynamic" : "none"),
             fp16             ? "auto: fp16 needs loss scaling"
             : mode == "fp8" ? "auto: fp8 scales each FP8 tensor itself; the rest is BF16, with FP32's exponent range"
                              : "auto: " + mode + " has FP32's exponent range");
  }

  if (spec.get_string("experiment.name").empty())
    spec.set("experiment.name", YAML::Node(std::filesystem::path(spec.source_path()).stem().string()),
             "the spec file's name");

  const double init = spec.get_float("precision.loss_scale.init");
  if (init < spec.get_float("precision.loss_scale.min_scale") || init > spec.get_float("precision.loss_scale.max_scale"))
    problems.push_back(at(spec, "precision.loss_scale.init") + " = " + spec.value_text("precision.loss_scale.init") +
                       ": expected a value between precision.loss_scale.min_scale and max_scale");

  if (spec.get_int("train.epochs") == 0 && spec.get_int("train.max_steps") == 0)
    problems.push_back(at(spec, "train.epochs") + " and train.max_steps are both 0; set one to a positive number");

  if (const int64_t channels = spec.get_int("data.channels"); channels == 2)
    problems.push_back(at(spec, "data.channels") + " = 2: expected 0 (native), 1, or 3 (grayscale replicated to RGB)");

  const std::string root = spec.get_string("data.root");
  const std::string data_name = spec.get_string("data.name");
  const bool text = data_name == "text_corpus" || data_name == "text_classification";
  if (text) {
    if (data_name == "text_corpus") {
      try {
        data::corpus_files(root);
      } catch (const Error& e) {
        problems.push_back(at(spec, "data.root") + " = " + e.what());
      }
    } else {
      for (const char* file : {"train.tsv", "test.tsv"})
        if (const std::string why = path_problem(root + "/" + file, PathKind::kFile); !why.empty())
          problems.push_back(at(spec, "data.root") + " = " + root + ": " + file + ": " + why +
                             " (LABEL<TAB>TEXT per line)");
    }
    const std::string vocab = spec.get_string("data.vocab");
    if (const std::string why = path_problem(vocab, PathKind::kFile); !why.empty())
      problems.push_back(at(spec, "data.vocab") + " = " + vocab + ": " + why +
                         " (scripts/setup.sh converts bert-base-uncased's vocabulary to "
                         "data/bert-base-uncased/vocab.txt)");
  } else if (spec.get_string("data.name") == "cifar10") {
    const std::string nested = root + "/cifar-10-batches-bin";
    const std::string folder = path_problem(nested, PathKind::kFolder).empty() ? nested : root;
    for (const char* file : {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin",
                             "data_batch_5.bin", "test_batch.bin"})
      if (const std::string why = path_problem(folder + "/" + file, PathKind::kFile); !why.empty())
        problems.push_back(at(spec, "data.root") + " = " + root + ": " + file + ": " + why +
                           " (CIFAR-10's binary version, cifar-10-binary.tar.gz)");
  } else if (spec.get_string("data.name") == "image_folder") {
    if (const std::string why = path_problem(root + "/train", PathKind::kFolder); !why.empty())
      problems.push_back(at(spec, "data.root") + " = " + root + ": train/: " + why +
                         " (expected ROOT/train/<class>/*.jpg)");
  } else if (const std::string why = path_problem(root, PathKind::kFolder); !why.empty()) {
    problems.push_back(at(spec, "data.root") + " = " + root + ": " + why +
                       " (for Fashion-MNIST: apt-get install dataset-fashion-mnist)");
  } else {
    for (const auto& stem : data::fashion_mnist_stems())
      if (data::find_idx_file(root, stem).empty())
        problems.push_back(at(spec, "data.root") + " = " + root + ": missing " + stem + "[.gz]");
  }
  if (const std::string init = spec.get_string("model.init_from"); !init.empty())
    if (const std::string why = path_problem(init, PathKind::kFile); !why.empty())
      problems.push_back(at(spec, "model.init_from") + " = " + init + ": " + why);
  const bool bert = spec.get_string("model.name").rfind("bert", 0) == 0;
  if (const std::string hf = spec.get_string("model.hf_config"); !hf.empty())
    if (const std::string why = path_problem(hf, PathKind::kAny); !why.empty())
      problems.push_back(at(spec, "model.hf_config") + " = " + hf + ": " + why);
  if (spec.get_string("model.name") == "bert" && spec.get_string("model.hf_config").empty())
    problems.push_back(at(spec, "model.name") + " = bert: takes its architecture from model.hf_config (a Hugging "
                       "Face config.json); set it, or name a preset (bert-tiny|mini|small|medium|base|large)");
  if (bert != text)
    problems.push_back(at(spec, "model.name") + " = " + spec.get_string("model.name") + ": " +
                       (bert ? "BERT reads token sequences; expected data.name: text_corpus or text_classification"
                             : "reads images; expected an image dataset (text needs a bert-* model)"));

  config::throw_if_errors(spec.source_path(), problems);
}

config::Spec load_resolved_spec(const std::string& path, const std::vector<std::string>& overrides) {
  config::Spec spec = config::load_spec(path, overrides);
  resolve_spec(spec, probe_hardware());
  return spec;
}

}  // namespace mpt::run
