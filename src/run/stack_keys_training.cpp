// The stack's training and system keys (optimizer, schedule, train, checkpoint, memory, device, distributed, debug),
// each declared once: its row with its member.
#include "run/key_binding.h"

namespace mpt::run::stack {

std::vector<StackKey> training_keys() {
  return {
      bind(choice("optimizer.name", "adam", {"sgd", "adam", "adamw"}, "Optimizer over the FP32 weights."),
           &E::optimizer, &O::name),
      bind(real("optimizer.lr", "0.001", 0, kInf, "Peak learning rate (before linear scaling).", true), &E::optimizer,
           &O::lr),
      bind(real("optimizer.momentum", "0.9", 0, 1, "SGD momentum.", false, true), &E::optimizer, &O::momentum),
      bind(boolean("optimizer.nesterov", "false", "SGD Nesterov momentum."), &E::optimizer, &O::nesterov),
      bind(real("optimizer.weight_decay", "0.0", 0, kInf, "L2 (sgd, adam) or decoupled (adamw) weight decay."),
           &E::optimizer, &O::weight_decay),
      bind(real("optimizer.beta1", "0.9", 0, 1, "Adam/AdamW beta1.", false, true), &E::optimizer, &O::beta1),
      bind(real("optimizer.beta2", "0.999", 0, 1, "Adam/AdamW beta2.", false, true), &E::optimizer, &O::beta2),
      bind(real("optimizer.eps", "1e-8", 0, kInf, "Adam/AdamW epsilon.", true), &E::optimizer, &O::eps),
      bind(choice("schedule.name", "constant", {"constant", "step", "linear", "cosine"}, "LR schedule after warmup."),
           &E::schedule, &S::name),
      bind(integer("schedule.warmup_steps", "0", 0, kInf, "Linear warmup from 0 over this many applied steps."),
           &E::schedule, &S::warmup_steps),
      bind(integer("schedule.step_size", "1000", 1, kInf, "step: multiply the LR by gamma every step_size steps."),
           &E::schedule, &S::step_size),
      bind(real("schedule.gamma", "0.1", 0, 1, "step: decay factor.", true), &E::schedule, &S::gamma),
      bind(real("schedule.min_lr_ratio", "0.0", 0, 1, "linear/cosine: final LR as a fraction of the peak."),
           &E::schedule, &S::min_lr_ratio),
      bind(integer("schedule.base_batch_size", "0", 0, kInf,
                   "Linear scaling rule: when > 0, lr and warmup_steps scale by global_batch / base_batch_size."),
           &E::schedule, &S::base_batch_size),
      bind(
          resumable(integer("train.epochs", "10", 0, kInf, "Passes over the training set (used when max_steps is 0).")),
          &E::train, &T::epochs),
      bind(
          resumable(integer("train.max_steps", "0", 0, kInf, "Stop after this many steps; overrides epochs when > 0.")),
          &E::train, &T::max_steps),
      bind(resumable(integer("train.log_every_steps", "50", 1, kInf, "Write a metrics line every N steps.")), &E::train,
           &T::log_every_steps),
      bind(resumable(integer("train.eval_every_steps", "0", 0, kInf,
                             "Evaluate every N steps (0 = at the end of each epoch).")),
           &E::train, &T::eval_every_steps),
      bind(integer("train.eval_batch_size", "1000", 1, 1 << 20, "Samples per evaluation batch (no gradients kept)."),
           &E::train, &T::eval_batch_size),
      bind(real("train.grad_clip_norm", "0.0", 0, kInf, "Clip the global grad norm (after unscaling); 0 = off."),
           &E::train, &T::grad_clip_norm),
      bind(integer("train.grad_accum_steps", "1", 1, 4096, "Micro-batches accumulated per optimizer step."), &E::train,
           &T::grad_accum_steps),
      bind(integer("train.max_consecutive_skips", "100", 1, kInf,
                   "Stop with status 'diverged' after this many consecutive steps with non-finite gradients."),
           &E::train, &T::max_consecutive_skips),
      bind(resumable(choice("train.progress", "auto", {"auto", "bar", "plain"},
                            "auto: a live line on a TTY, log lines otherwise.")),
           &E::train, &T::progress),
      bind(resumable(integer("checkpoint.every_steps", "500", 0, kInf,
                             "Save every N steps (0 = only at the end); always at the end.")),
           &E::checkpoint, &C::every_steps),
      bind(resumable(integer("checkpoint.keep_last", "3", 1, kInf, "Keep the newest N checkpoints.")), &E::checkpoint,
           &C::keep_last),
      bind(
          resumable(choice("memory.activation_checkpointing", "none", {"none", "full", "selective"},
                           "Trade a second forward for activation memory: full keeps only each ResNet bottleneck's and "
                           "BERT encoder layer's input and recomputes the rest in backward; selective (BERT) keeps the "
                           "GEMM outputs and recomputes the attention core (scores, softmax, dropout, the product "
                           "with V), the GELU and the LayerNorms' BF16 copies. Gradients are bit for bit those of "
                           "none.")),
          &E::memory, &models::MemoryConfig::activation_checkpointing),
  };
}

std::vector<StackKey> system_keys() {
  return {
      bind(choice("device.type", "auto", {"auto", "cpu", "cuda"}, "auto: cuda when available, else cpu."), &E::device,
           &V::type),
      bind(resumable(integer("device.threads", "0", 0, 1024,
                             "Intra-op and BLAS threads (0 = all cores, shared among the ranks on one machine).")),
           &E::device, &V::threads),
      bind(choice("distributed.backend", "auto", {"auto", "gloo", "nccl"},
                  "Data-parallel engine (c10d) when launched with --nproc, torchrun or srun: auto = nccl on CUDA, gloo "
                  "on CPU."),
           &E::distributed, &R::backend),
      bind(resumable(real(
               "distributed.timeout_sec", "300", 1, kInf,
               "Longest wait for the rendezvous and for any collective: a rank that died or hangs stops the others "
               "with an error after at most this long.")),
           &E::distributed, &R::timeout_sec),
      bind(real("distributed.bucket_mb", "25", 0.01, kInf, "Gradient all-reduce bucket size (PyTorch DDP's default)."),
           &E::distributed, &R::bucket_mb),
      bind(boolean("distributed.sync_batchnorm", "false",
                   "Batch norm with the global batch's statistics (all ranks), as PyTorch's SyncBatchNorm; false: "
                   "each rank normalises with its own batch (DDP's default)."),
           &E::distributed, &R::sync_batchnorm),
      bind(
          resumable(boolean("distributed.shard_optimizer", "false",
                            "ZeRO-1: each rank keeps the FP32 masters and optimizer state of 1/N of the parameters, "
                            "updates them after the gradient all-reduce and broadcasts the new weights; the losses are "
                            "bit for bit those of unsharded data parallelism, and checkpoints hold the whole state.")),
          &E::distributed, &R::shard_optimizer),
      bind(resumable(boolean(
               "debug.check_numerics", "false",
               "Check every module's output for Inf/NaN and name the first offender (one sync per module: slow).")),
           &E::debug, &G::check_numerics),
      bind(resumable(list("debug.inject_nonfinite_grad_at", KeyType::kIntList, "[]", 1,
                          "Steps at which one gradient is set to +inf after backward, to rehearse overflow handling.")),
           &E::debug, &G::inject_nonfinite_grad_at),
      bind(resumable(text(
               "debug.inject_nonfinite_param", "\"\"",
               "Parameter (module path, e.g. head.weight) that receives the injected Inf; empty = the first one.")),
           &E::debug, &G::inject_nonfinite_param),
      bind(resumable(integer(
               "debug.stop_after_steps", "0", 0, kInf,
               "Stop as if interrupted after this step (checkpoint, status 'interrupted'), to rehearse resume.")),
           &E::debug, &G::stop_after_steps),
      bind(resumable(integer(
               "debug.inject_nonfinite_rank", "-1", -1, kInf,
               "Data parallelism: only this rank injects the Inf of inject_nonfinite_grad_at (-1 = every rank).")),
           &E::debug, &G::inject_nonfinite_rank),
      bind(resumable(integer(
               "debug.die_at_step", "0", 0, kInf,
               "Data parallelism: the last rank kills itself (SIGKILL) at this step, to rehearse losing a rank.")),
           &E::debug, &G::die_at_step),
      bind(resumable(
               real("debug.slow_down", "0.0", 0, 10,
                    "Sleep this fraction of each step's own time inside the step: a planted slowdown (0.1 = 10% fewer "
                    "samples/s), to check that a nightly's throughput alarm catches it.")),
           &E::debug, &G::slow_down),
      bind(resumable(boolean(
               "debug.forbid_host_syncs", "false",
               "On a GPU: stop with an error naming the operation when a training step makes the host wait for the "
               "device anywhere but the one overflow check (LibTorch's sync debug mode). No effect on a CPU.")),
           &E::debug, &G::forbid_host_syncs),
  };
}

}  // namespace mpt::run::stack
