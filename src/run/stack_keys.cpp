// The stack's own spec keys (experiment, model, data, precision), each declared once: its row with its member.
#include "run/key_binding.h"

namespace mpt::run::stack {

std::vector<StackKey> experiment_and_model_keys() {
  return {
      bind(resumable(text("experiment.name", "\"\"", "Run name; empty means the spec file's stem.")), &E::experiment,
           &X::name),
      bind(integer("experiment.seed", "0", 0, 4294967295.0, "Seeds weights, dropout and the data order."),
           &E::experiment, &X::seed),
      bind(resumable(text("experiment.output_root", "runs",
                          "Run directories go to OUTPUT_ROOT/NAME unless --run-dir is given.")),
           &E::experiment, &X::output_root),
      bind(choice(
               "model.name", "mlp", {},
               "Model from the registry: the presets of each model family (docs/spec.md lists them with the keys each "
               "family adds)."),
           &E::model, &M::name),
      bind(real("model.dropout", "0.0", 0, 1,
                "Dropout of the families that have it: MLP after each hidden layer; BERT and ViT on hidden states and "
                "attention (both train with 0.1).",
                false, true),
           &E::model, &M::dropout),
      bind(text("model.init_from", "\"\"",
                "Start from these weights: a safetensors, PyTorch zip (torch.save) or mpt checkpoint file with "
                "torchvision / Hugging Face names (DDP's module. and torch.compile's _orig_mod. prefixes are dropped), "
                "or a Hugging Face model folder (its model.safetensors or pytorch_model.bin); model tensors the file "
                "lacks keep their initialisation (a new head).")
               .path(),
           &E::model, &M::init_from),
      bind(list("model.init_skip", KeyType::kStringList, "[]", 0,
                "Model tensors (globs over their names, e.g. [fc.*]) that keep their initialisation whatever "
                "model.init_from holds: fine-tuning with a head of another size."),
           &E::model, &M::init_skip),
  };
}

std::vector<StackKey> data_keys() {
  return {
      bind(
          choice("data.name", "fashion_mnist", {},  // the datasets' names (data/datasets.h)
                 "Dataset: Fashion-MNIST, CIFAR-10 (binary version), an image folder (JPEG/PNG), a text corpus for "
                 "masked-LM, labelled text (TSV) for BERT classification, or documents for causal language modelling."),
          &E::data, &D::name),
      bind(text("data.root", "/usr/share/datasets/fashion-mnist",
                "fashion_mnist: folder with {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]; cifar10: folder with "
                "data_batch_1..5.bin and test_batch.bin; image_folder: ROOT/train/<class>/*.jpg|png and ROOT/val (or "
                "test)/<class>/...; text_corpus: a UTF-8 file, or a folder whose *.txt files are read in sorted order; "
                "text_classification: folder with train.tsv and test.tsv (LABEL<TAB>TEXT per line).")
               .path(),
           &E::data, &D::root),
      bind(integer("data.batch_size", "128", 1, 1 << 20,
                   "Micro-batch per step; the global batch is this x grad_accum_steps."),
           &E::data, &D::batch_size),
      bind(boolean("data.shuffle", "true", "Reshuffle the training set every epoch (deterministic in seed and epoch)."),
           &E::data, &D::shuffle),
      bind(integer("data.train_limit", "0", 0, kInf, "Use only the first N training samples (0 = all)."), &E::data,
           &D::train_limit),
      bind(integer("data.test_limit", "0", 0, kInf, "Evaluate on only the first N test samples (0 = all)."), &E::data,
           &D::test_limit),
  };
}

std::vector<StackKey> precision_keys() {
  return {
      bind(choice("precision.mode", "fp32", {"fp32", "mixed", "mixed_bf16", "mixed_fp16", "fp8"},
                  "mixed resolves to bf16 on a CPU with BF16 and on CUDA >= 8.0, fp16 on CUDA 7.x. fp8: the GEMMs of "
                  "Linear layers outside the FP32 islands take E4M3 inputs and weights and E5M2 output gradients, "
                  "each scaled per tensor (precision.fp8.*), everything else as mixed_bf16; on FP8 Tensor Cores (CUDA "
                  ">= 8.9) through _scaled_mm, elsewhere emulated with the same rounding and saturation."),
           &E::precision, &P::mode),
      bind(
          choice("precision.strategy", "autocast", {"auto", "autocast", "master_weights"},
                 "autocast: FP32 weights cast per op (PyTorch AMP, Apex O1); master_weights: BF16/FP16 weights in the "
                 "model, FP32 masters in the optimizer (Apex O2); auto: master_weights for mixed precision on the CPU, "
                 "where the fused optimizer steps the masters in one pass, autocast elsewhere."),
          &E::precision, &P::strategy),
      bind(
          list(
              "precision.fp32_modules", KeyType::kStringList, "[head, fc, '*LayerNorm', cls.predictions, classifier]",
              0,
              "Module name patterns run as FP32 islands under autocast, FP32 activations in and out ('*' matches any "
              "run of characters): by default the output layers (MLP head, ResNet fc, BERT's heads) and BERT's "
              "LayerNorms, and a family's own output layers and norms beyond these (ViT: heads, *.ln_1, *.ln_2, "
              "encoder.ln) when it is the model. Batch norms keep FP32 weights and statistics and compute in FP32 on "
              "BF16/FP16 activations "
              "without being listed; add '*bn*' and '*downsample.1' to give them FP32 activations too. An entry 'auto' "
              "adds the family's islands and the projections a measurement on the run's own data finds damaged in its "
              "training format (docs/numerics.md)."),
          &E::precision, &P::fp32_modules),
      bind(choice(
               "precision.fp8.recipe", "delayed", {},  // the GEMM formats' recipes (precision/gemm_formats.h)
               "fp8 scaling: delayed, each tensor's scale from the largest amax of its last amax_history steps, "
               "updated after each step (Transformer Engine); current, from the tensor's amax as it is cast (torchao); "
               "mxfp8, the OCP Microscaling format: E4M3 elements with one power-of-two scale per block of 32 along "
               "each GEMM's reduction dimension, from the block's own amax."),
           &E::precision, &P::fp8, &F8::recipe),
      bind(integer("precision.fp8.amax_history", "16", 1, 1024, "fp8, delayed: steps of amax history per tensor."),
           &E::precision, &P::fp8, &F8::amax_history),
      bind(integer("precision.fp8.margin", "0", 0, 32, "fp8: scale = format max / amax / 2^margin (headroom)."),
           &E::precision, &P::fp8, &F8::margin),
      bind(boolean("precision.tf32", "false", "CUDA FP32 runs: allow TF32 Tensor Core math in matmul and cuDNN."),
           &E::precision, &P::tf32),
      bind(choice("precision.loss_scale.mode", "auto", {"auto", "dynamic", "static", "none"},
                  "auto: dynamic for fp16, none otherwise. Non-finite gradients always skip the step."),
           &E::precision, &P::loss_scale, &L::mode),
      bind(real("precision.loss_scale.init", "32768", 0, kFp32Max, "Initial (or static) loss scale (the seed's 2^15).",
                true),
           &E::precision, &P::loss_scale, &L::init),
      bind(real("precision.loss_scale.growth_factor", "2.0", 1, kFp32Max,
                "Scale multiplier after growth_interval clean steps.", true),
           &E::precision, &P::loss_scale, &L::growth_factor),
      bind(real("precision.loss_scale.backoff_factor", "0.5", 0, 1, "Scale multiplier on overflow.", true, true),
           &E::precision, &P::loss_scale, &L::backoff_factor),
      bind(integer("precision.loss_scale.growth_interval", "2000", 1, kInf, "Overflow-free steps before growing."),
           &E::precision, &P::loss_scale, &L::growth_interval),
      bind(integer("precision.loss_scale.hysteresis", "1", 1, kInf,
                   "Overflows absorbed before a backoff, re-armed by a growth (1 = PyTorch, 2 = DeepSpeed)."),
           &E::precision, &P::loss_scale, &L::hysteresis),
      bind(real("precision.loss_scale.min_scale", "1.0", 0, kFp32Max,
                "Floor of the dynamic scale (0 = none, as PyTorch)."),
           &E::precision, &P::loss_scale, &L::min_scale),
      bind(real("precision.loss_scale.max_scale", "16777216", 0, kFp32Max,
                "Ceiling of the dynamic scale (2^24, as Apex).", true),
           &E::precision, &P::loss_scale, &L::max_scale),
      bind(integer("precision.loss_scale.max_overflows_at_min", "10", 1, kInf,
                   "Consecutive overflows at min_scale after which the run stops as 'diverged' (scale collapse)."),
           &E::precision, &P::loss_scale, &L::max_overflows_at_min),
  };
}

}  // namespace mpt::run::stack

namespace mpt::run {

std::vector<StackKey> stack_keys() {
  std::vector<StackKey> all;
  for (auto section : {stack::experiment_and_model_keys, stack::data_keys, stack::precision_keys, stack::training_keys,
                       stack::system_keys})
    for (auto& key : section()) all.push_back(std::move(key));
  return all;
}

}  // namespace mpt::run
