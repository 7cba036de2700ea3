// The spec key table. Defaults here are the defaults everywhere (README/docs are generated from it).
#include "config/schema.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/error.h"

namespace mpt::config {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// Loss scales are FP32 values (GradScaler's scale is an FP32 tensor): beyond this they are Inf.
constexpr double kFp32Max = std::numeric_limits<float>::max();

KeySpec integer(std::string key, std::string def, double min, double max, std::string doc) {
  return KeySpec{std::move(key), KeyType::kInt, std::move(def), {}, min, max, false, false, std::move(doc)};
}
KeySpec real(std::string key, std::string def, double min, double max, std::string doc, bool min_exclusive = false,
             bool max_exclusive = false) {
  return KeySpec{std::move(key), KeyType::kFloat, std::move(def), {}, min, max,
                 min_exclusive,  max_exclusive,   std::move(doc)};
}
KeySpec boolean(std::string key, std::string def, std::string doc) {
  return KeySpec{std::move(key), KeyType::kBool, std::move(def), {}, -kInf, kInf, false, false, std::move(doc)};
}
KeySpec text(std::string key, std::string def, std::string doc) {
  return KeySpec{std::move(key), KeyType::kString, std::move(def), {}, -kInf, kInf, false, false, std::move(doc)};
}
KeySpec choice(std::string key, std::string def, std::vector<std::string> choices, std::string doc) {
  return KeySpec{std::move(key), KeyType::kString, std::move(def), std::move(choices), -kInf, kInf, false,
                 false,          std::move(doc)};
}
KeySpec list(std::string key, KeyType type, std::string def, double min, std::string doc) {
  return KeySpec{std::move(key), type, std::move(def), {}, min, kInf, false, false, std::move(doc)};
}
// A key whose value may change when a run resumes (cadences, budgets, rehearsals): everything else must match
// the run directory's config.yaml.
KeySpec resumable(KeySpec spec) {
  spec.resumable = true;
  return spec;
}

std::vector<KeySpec> experiment_and_model_keys() {
  return {
      resumable(text("experiment.name", "\"\"", "Run name; empty means the spec file's stem.")),
      integer("experiment.seed", "0", 0, 4294967295.0, "Seeds weights, dropout and the data order."),
      resumable(
          text("experiment.output_root", "runs", "Run directories go to OUTPUT_ROOT/NAME unless --run-dir is given.")),

      choice("model.name", "mlp", {},
             "Model from the registry: the presets of each model family (docs/spec.md lists them with the keys each "
             "family adds)."),
      real("model.dropout", "0.0", 0, 1,
           "Dropout of the families that have it: MLP after each hidden layer; BERT and ViT on hidden states and "
           "attention (both train with 0.1).",
           false, true),
      text("model.init_from", "\"\"",
           "Start from these weights: a safetensors, PyTorch zip (torch.save) or mpt checkpoint file with "
           "torchvision / Hugging Face names (DDP's module. and torch.compile's _orig_mod. prefixes are dropped), "
           "or a Hugging Face model folder (its model.safetensors or pytorch_model.bin); model tensors the file "
           "lacks keep their initialisation (a new head).")
          .path(),
      list("model.init_skip", KeyType::kStringList, "[]", 0,
           "Model tensors (globs over their names, e.g. [fc.*]) that keep their initialisation whatever "
           "model.init_from holds: fine-tuning with a head of another size."),
  };
}

std::vector<KeySpec> data_keys() {
  return {
      choice("data.name", "fashion_mnist", {},  // the datasets' names (data/datasets.h)
             "Dataset: Fashion-MNIST, CIFAR-10 (binary version), an image folder (JPEG/PNG), a text corpus for "
             "masked-LM, labelled text (TSV) for BERT classification, or documents for causal language modelling."),
      text("data.root", "/usr/share/datasets/fashion-mnist",
           "fashion_mnist: folder with {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]; cifar10: folder with "
           "data_batch_1..5.bin and test_batch.bin; image_folder: ROOT/train/<class>/*.jpg|png and ROOT/val (or "
           "test)/<class>/...; text_corpus: a UTF-8 file, or a folder whose *.txt files are read in sorted order; "
           "text_classification: folder with train.tsv and test.tsv (LABEL<TAB>TEXT per line).")
          .path(),
      integer("data.batch_size", "128", 1, 1 << 20,
              "Micro-batch per step; the global batch is this x grad_accum_steps."),
      boolean("data.shuffle", "true", "Reshuffle the training set every epoch (deterministic in seed and epoch)."),
      integer("data.train_limit", "0", 0, kInf, "Use only the first N training samples (0 = all)."),
      integer("data.test_limit", "0", 0, kInf, "Evaluate on only the first N test samples (0 = all)."),
  };
}

std::vector<KeySpec> precision_keys() {
  return {
      choice("precision.mode", "fp32", {"fp32", "mixed", "mixed_bf16", "mixed_fp16", "fp8"},
             "mixed resolves to bf16 on a CPU with BF16 and on CUDA >= 8.0, fp16 on CUDA 7.x. fp8: the GEMMs of "
             "Linear layers outside the FP32 islands take E4M3 inputs and weights and E5M2 output gradients, "
             "each scaled per tensor (precision.fp8.*), everything else as mixed_bf16; on FP8 Tensor Cores (CUDA "
             ">= 8.9) through _scaled_mm, elsewhere emulated with the same rounding and saturation."),
      choice("precision.strategy", "autocast", {"auto", "autocast", "master_weights"},
             "autocast: FP32 weights cast per op (PyTorch AMP, Apex O1); master_weights: BF16/FP16 weights in the "
             "model, FP32 masters in the optimizer (Apex O2); auto: master_weights for mixed precision on the CPU, "
             "where the fused optimizer steps the masters in one pass, autocast elsewhere."),
      list("precision.fp32_modules", KeyType::kStringList, "[head, fc, '*LayerNorm', cls.predictions, classifier]", 0,
           "Module name patterns run as FP32 islands under autocast, FP32 activations in and out ('*' matches any "
           "run of characters): by default the output layers (MLP head, ResNet fc, BERT's heads) and BERT's "
           "LayerNorms, and a family's own output layers and norms beyond these (ViT: heads, *.ln_1, *.ln_2, "
           "encoder.ln) when it is the model. Batch norms keep FP32 weights and statistics and compute in FP32 on "
           "BF16/FP16 activations "
           "without being listed; add '*bn*' and '*downsample.1' to give them FP32 activations too. An entry 'auto' "
           "adds the family's islands and the projections a measurement on the run's own data finds damaged in its "
           "training format (docs/numerics.md)."),
      choice("precision.fp8.recipe", "delayed", {},  // the GEMM formats' recipes (precision/gemm_formats.h)
             "fp8 scaling: delayed, each tensor's scale from the largest amax of its last amax_history steps, "
             "updated after each step (Transformer Engine); current, from the tensor's amax as it is cast (torchao); "
             "mxfp8, the OCP Microscaling format: E4M3 elements with one power-of-two scale per block of 32 along "
             "each GEMM's reduction dimension, from the block's own amax."),
      integer("precision.fp8.amax_history", "16", 1, 1024, "fp8, delayed: steps of amax history per tensor."),
      integer("precision.fp8.margin", "0", 0, 32, "fp8: scale = format max / amax / 2^margin (headroom)."),
      boolean("precision.tf32", "false", "CUDA FP32 runs: allow TF32 Tensor Core math in matmul and cuDNN."),
      choice("precision.loss_scale.mode", "auto", {"auto", "dynamic", "static", "none"},
             "auto: dynamic for fp16, none otherwise. Non-finite gradients always skip the step."),
      real("precision.loss_scale.init", "32768", 0, kFp32Max, "Initial (or static) loss scale (the seed's 2^15).",
           true),
      real("precision.loss_scale.growth_factor", "2.0", 1, kFp32Max,
           "Scale multiplier after growth_interval clean steps.", true),
      real("precision.loss_scale.backoff_factor", "0.5", 0, 1, "Scale multiplier on overflow.", true, true),
      integer("precision.loss_scale.growth_interval", "2000", 1, kInf, "Overflow-free steps before growing."),
      integer("precision.loss_scale.hysteresis", "1", 1, kInf,
              "Overflows absorbed before a backoff, re-armed by a growth (1 = PyTorch, 2 = DeepSpeed)."),
      real("precision.loss_scale.min_scale", "1.0", 0, kFp32Max, "Floor of the dynamic scale (0 = none, as PyTorch)."),
      real("precision.loss_scale.max_scale", "16777216", 0, kFp32Max, "Ceiling of the dynamic scale (2^24, as Apex).",
           true),
      integer("precision.loss_scale.max_overflows_at_min", "10", 1, kInf,
              "Consecutive overflows at min_scale after which the run stops as 'diverged' (scale collapse)."),
  };
}

std::vector<KeySpec> training_keys() {
  return {
      choice("optimizer.name", "adam", {"sgd", "adam", "adamw"}, "Optimizer over the FP32 weights."),
      real("optimizer.lr", "0.001", 0, kInf, "Peak learning rate (before linear scaling).", true),
      real("optimizer.momentum", "0.9", 0, 1, "SGD momentum.", false, true),
      boolean("optimizer.nesterov", "false", "SGD Nesterov momentum."),
      real("optimizer.weight_decay", "0.0", 0, kInf, "L2 (sgd, adam) or decoupled (adamw) weight decay."),
      real("optimizer.beta1", "0.9", 0, 1, "Adam/AdamW beta1.", false, true),
      real("optimizer.beta2", "0.999", 0, 1, "Adam/AdamW beta2.", false, true),
      real("optimizer.eps", "1e-8", 0, kInf, "Adam/AdamW epsilon.", true),

      choice("schedule.name", "constant", {"constant", "step", "linear", "cosine"}, "LR schedule after warmup."),
      integer("schedule.warmup_steps", "0", 0, kInf, "Linear warmup from 0 over this many applied steps."),
      integer("schedule.step_size", "1000", 1, kInf, "step: multiply the LR by gamma every step_size steps."),
      real("schedule.gamma", "0.1", 0, 1, "step: decay factor.", true),
      real("schedule.min_lr_ratio", "0.0", 0, 1, "linear/cosine: final LR as a fraction of the peak."),
      integer("schedule.base_batch_size", "0", 0, kInf,
              "Linear scaling rule: when > 0, lr and warmup_steps scale by global_batch / base_batch_size."),

      resumable(integer("train.epochs", "10", 0, kInf, "Passes over the training set (used when max_steps is 0).")),
      resumable(integer("train.max_steps", "0", 0, kInf, "Stop after this many steps; overrides epochs when > 0.")),
      resumable(integer("train.log_every_steps", "50", 1, kInf, "Write a metrics line every N steps.")),
      resumable(
          integer("train.eval_every_steps", "0", 0, kInf, "Evaluate every N steps (0 = at the end of each epoch).")),
      integer("train.eval_batch_size", "1000", 1, 1 << 20, "Samples per evaluation batch (no gradients kept)."),
      real("train.grad_clip_norm", "0.0", 0, kInf, "Clip the global grad norm (after unscaling); 0 = off."),
      integer("train.grad_accum_steps", "1", 1, 4096, "Micro-batches accumulated per optimizer step."),
      integer("train.max_consecutive_skips", "100", 1, kInf,
              "Stop with status 'diverged' after this many consecutive steps with non-finite gradients."),
      resumable(choice("train.progress", "auto", {"auto", "bar", "plain"},
                       "auto: a live line on a TTY, log lines otherwise.")),

      resumable(integer("checkpoint.every_steps", "500", 0, kInf,
                        "Save every N steps (0 = only at the end); always at the end.")),
      resumable(integer("checkpoint.keep_last", "3", 1, kInf, "Keep the newest N checkpoints.")),
      resumable(choice("memory.activation_checkpointing", "none", {"none", "full", "selective"},
                       "Trade a second forward for activation memory: full keeps only each ResNet bottleneck's and "
                       "BERT encoder layer's input and recomputes the rest in backward; selective (BERT) keeps the "
                       "GEMM outputs and recomputes the attention core (scores, softmax, dropout, the product "
                       "with V), the GELU and the LayerNorms' BF16 copies. Gradients are bit for bit those of "
                       "none.")),
  };
}

std::vector<KeySpec> system_keys() {
  return {
      choice("device.type", "auto", {"auto", "cpu", "cuda"}, "auto: cuda when available, else cpu."),
      resumable(integer("device.threads", "0", 0, 1024,
                        "Intra-op and BLAS threads (0 = all cores, shared among the ranks on one machine).")),

      choice("distributed.backend", "auto", {"auto", "gloo", "nccl"},
             "Data-parallel engine (c10d) when launched with --nproc, torchrun or srun: auto = nccl on CUDA, gloo "
             "on CPU."),
      resumable(
          real("distributed.timeout_sec", "300", 1, kInf,
               "Longest wait for the rendezvous and for any collective: a rank that died or hangs stops the others "
               "with an error after at most this long.")),
      real("distributed.bucket_mb", "25", 0.01, kInf, "Gradient all-reduce bucket size (PyTorch DDP's default)."),
      boolean("distributed.sync_batchnorm", "false",
              "Batch norm with the global batch's statistics (all ranks), as PyTorch's SyncBatchNorm; false: "
              "each rank normalises with its own batch (DDP's default)."),
      resumable(boolean("distributed.shard_optimizer", "false",
                        "ZeRO-1: each rank keeps the FP32 masters and optimizer state of 1/N of the parameters, "
                        "updates them after the gradient all-reduce and broadcasts the new weights; the losses are "
                        "bit for bit those of unsharded data parallelism, and checkpoints hold the whole state.")),

      resumable(
          boolean("debug.check_numerics", "false",
                  "Check every module's output for Inf/NaN and name the first offender (one sync per module: slow).")),
      resumable(list("debug.inject_nonfinite_grad_at", KeyType::kIntList, "[]", 1,
                     "Steps at which one gradient is set to +inf after backward, to rehearse overflow handling.")),
      resumable(
          text("debug.inject_nonfinite_param", "\"\"",
               "Parameter (module path, e.g. head.weight) that receives the injected Inf; empty = the first one.")),
      resumable(
          integer("debug.stop_after_steps", "0", 0, kInf,
                  "Stop as if interrupted after this step (checkpoint, status 'interrupted'), to rehearse resume.")),
      resumable(
          integer("debug.inject_nonfinite_rank", "-1", -1, kInf,
                  "Data parallelism: only this rank injects the Inf of inject_nonfinite_grad_at (-1 = every rank).")),
      resumable(
          integer("debug.die_at_step", "0", 0, kInf,
                  "Data parallelism: the last rank kills itself (SIGKILL) at this step, to rehearse losing a rank.")),
      resumable(real("debug.slow_down", "0.0", 0, 10,
                     "Sleep this fraction of each step's own time inside the step: a planted slowdown (0.1 = 10% fewer "
                     "samples/s), to check that a nightly's throughput alarm catches it.")),
      resumable(
          boolean("debug.forbid_host_syncs", "false",
                  "On a GPU: stop with an error naming the operation when a training step makes the host wait for the "
                  "device anywhere but the one overflow check (LibTorch's sync debug mode). No effect on a CPU.")),
  };
}

std::vector<KeySpec> build_schema() {
  std::vector<KeySpec> all;
  for (auto section : {experiment_and_model_keys, data_keys, precision_keys, training_keys, system_keys})
    for (auto& key : section()) all.push_back(std::move(key));
  return all;
}

std::vector<keys::KeyGroup>& groups() {
  static std::vector<keys::KeyGroup> added;
  return added;
}

bool& table_read() {
  static bool read = false;
  return read;
}

// The plug-ins' keys in their sections (each after the last key of its section) and their names in the deciding
// key's choices.
std::vector<KeySpec> assemble() {
  std::vector<KeySpec> table = build_schema();
  auto row = [&table](const std::string& key) {
    return std::find_if(table.begin(), table.end(), [&](const KeySpec& spec) { return spec.key == key; });
  };
  for (const auto& group : groups()) {
    if (!group.deciding_key.empty()) {
      auto deciding = row(group.deciding_key);
      if (deciding == table.end()) throw Error("a plug-in names " + group.deciding_key + ", which is no spec key");
      for (const auto& name : group.names) deciding->choices.push_back(name);
    }
    for (const auto& key : group.keys) {
      if (row(key.key) != table.end()) continue;  // another plug-in of the kind declares it too (add_plugin_keys)
      const std::string section = key.key.substr(0, key.key.find('.') + 1);
      auto last = std::find_if(table.rbegin(), table.rend(),
                               [&](const KeySpec& spec) { return spec.key.rfind(section, 0) == 0; });
      table.insert(last == table.rend() ? table.end() : last.base(), key);  // a section of plug-ins only: last
    }
  }
  return table;
}

bool same_row(const KeySpec& a, const KeySpec& b) {
  return a.type == b.type && a.default_yaml == b.default_yaml && a.choices == b.choices && a.min == b.min &&
         a.max == b.max && a.doc == b.doc;
}

}  // namespace

void add_plugin_keys(const keys::KeyGroup& group) {
  if (table_read()) throw Error("a plug-in added its keys after the key table was read");
  for (const auto& key : group.keys)
    for (const auto& earlier : groups())
      for (const auto& other : earlier.keys)
        if (other.key == key.key && !same_row(other, key))
          throw Error("two plug-ins declare the spec key " + key.key + " differently");
  groups().push_back(group);
}

const std::vector<keys::KeyGroup>& plugin_key_groups() { return groups(); }

const std::vector<KeySpec>& schema() {
  table_read() = true;
  static const std::vector<KeySpec> table = assemble();
  return table;
}

const KeySpec* find_key(const std::string& key) {
  for (const auto& spec : schema())
    if (spec.key == key) return &spec;
  return nullptr;
}

bool may_differ_on_resume(const std::string& key) {
  const KeySpec* spec = find_key(key);
  return spec && spec->resumable;
}

}  // namespace mpt::config
