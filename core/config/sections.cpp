// Spec -> component config structs. Key names match the struct fields one to one.
#include "core/config/sections.h"

namespace mpt::config {

ExperimentConfig read_sections(const Spec& spec) {
  ExperimentConfig c;
  c.name = spec.get_string("experiment.name");
  c.seed = static_cast<uint64_t>(spec.get_int("experiment.seed"));
  c.output_root = spec.get_string("experiment.output_root");

  c.model.name = spec.get_string("model.name");
  c.model.mlp.hidden_sizes = spec.get_int_list("model.hidden_sizes");
  c.model.mlp.activation = spec.get_string("model.activation");
  c.model.mlp.dropout = spec.get_float("model.dropout");
  c.model.resnet.small_input = spec.get_bool("model.small_input");
  c.model.resnet.zero_init_residual = spec.get_bool("model.zero_init_residual");
  c.model.resnet.channels_last = spec.get_bool("model.channels_last");
  c.model.bert_head = spec.get_string("model.head");
  c.model.init_from = spec.get_string("model.init_from");
  c.model.bert_dropout = spec.get_float("model.dropout");
  c.model.bert_heads = spec.get_int("model.heads");
  c.model.hf_config = spec.get_string("model.hf_config");

  c.data.name = spec.get_string("data.name");
  c.data.root = spec.get_string("data.root");
  c.data.batch_size = spec.get_int("data.batch_size");
  c.data.shuffle = spec.get_bool("data.shuffle");
  c.data.train_limit = spec.get_int("data.train_limit");
  c.data.test_limit = spec.get_int("data.test_limit");
  c.data.image_size = spec.get_int("data.image_size");
  c.data.channels = spec.get_int("data.channels");
  c.data.augment = spec.get_bool("data.augment");
  c.data.workers = spec.get_int("data.workers");
  c.data.vocab = spec.get_string("data.vocab");
  c.data.lowercase = spec.get_bool("data.lowercase");
  c.data.seq_len = spec.get_int("data.seq_len");
  c.data.mask_prob = spec.get_float("data.mask_prob");
  c.data.test_every = spec.get_int("data.test_every");

  c.precision.mode = spec.get_string("precision.mode");
  c.precision.fp32_modules = spec.get_string_list("precision.fp32_modules");
  c.precision.tf32 = spec.get_bool("precision.tf32");
  c.precision.strategy = spec.get_string("precision.strategy");
  c.precision.loss_scale.mode = precision::parse_loss_scale_mode(spec.get_string("precision.loss_scale.mode"));
  c.precision.loss_scale.init = spec.get_float("precision.loss_scale.init");
  c.precision.loss_scale.growth_factor = spec.get_float("precision.loss_scale.growth_factor");
  c.precision.loss_scale.backoff_factor = spec.get_float("precision.loss_scale.backoff_factor");
  c.precision.loss_scale.growth_interval = spec.get_int("precision.loss_scale.growth_interval");
  c.precision.loss_scale.hysteresis = spec.get_int("precision.loss_scale.hysteresis");
  c.precision.loss_scale.min_scale = spec.get_float("precision.loss_scale.min_scale");
  c.precision.loss_scale.max_scale = spec.get_float("precision.loss_scale.max_scale");
  c.precision.loss_scale.max_overflows_at_min = spec.get_int("precision.loss_scale.max_overflows_at_min");

  c.optimizer.name = spec.get_string("optimizer.name");
  c.optimizer.lr = spec.get_float("optimizer.lr");
  c.optimizer.momentum = spec.get_float("optimizer.momentum");
  c.optimizer.nesterov = spec.get_bool("optimizer.nesterov");
  c.optimizer.weight_decay = spec.get_float("optimizer.weight_decay");
  c.optimizer.beta1 = spec.get_float("optimizer.beta1");
  c.optimizer.beta2 = spec.get_float("optimizer.beta2");
  c.optimizer.eps = spec.get_float("optimizer.eps");

  c.schedule.name = spec.get_string("schedule.name");
  c.schedule.peak_lr = c.optimizer.lr;
  c.schedule.warmup_steps = spec.get_int("schedule.warmup_steps");
  c.schedule.step_size = spec.get_int("schedule.step_size");
  c.schedule.gamma = spec.get_float("schedule.gamma");
  c.schedule.min_lr_ratio = spec.get_float("schedule.min_lr_ratio");
  c.base_batch_size = spec.get_int("schedule.base_batch_size");

  c.epochs = spec.get_int("train.epochs");
  c.max_steps = spec.get_int("train.max_steps");
  c.train.log_every_steps = spec.get_int("train.log_every_steps");
  c.train.eval_every_steps = spec.get_int("train.eval_every_steps");
  c.train.eval_batch_size = spec.get_int("train.eval_batch_size");
  c.train.grad_clip_norm = spec.get_float("train.grad_clip_norm");
  c.train.grad_accum_steps = spec.get_int("train.grad_accum_steps");
  c.train.max_consecutive_skips = spec.get_int("train.max_consecutive_skips");
  c.train.checkpoint_every_steps = spec.get_int("checkpoint.every_steps");
  c.train.inject_nonfinite_grad_at = spec.get_int_list("debug.inject_nonfinite_grad_at");
  c.train.inject_nonfinite_param = spec.get_string("debug.inject_nonfinite_param");
  c.train.stop_after_steps = spec.get_int("debug.stop_after_steps");
  c.train.inject_nonfinite_rank = spec.get_int("debug.inject_nonfinite_rank");
  c.train.die_at_step = spec.get_int("debug.die_at_step");
  c.train.forbid_host_syncs = spec.get_bool("debug.forbid_host_syncs");
  c.train.bucket_mb = spec.get_float("distributed.bucket_mb");
  c.distributed.backend = spec.get_string("distributed.backend");
  c.distributed.timeout_sec = spec.get_float("distributed.timeout_sec");
  c.sync_batchnorm = spec.get_bool("distributed.sync_batchnorm");
  c.progress = spec.get_string("train.progress");
  c.check_numerics = spec.get_bool("debug.check_numerics");
  c.checkpoint_keep_last = spec.get_int("checkpoint.keep_last");

  c.device = spec.get_string("device.type");
  c.threads = spec.get_int("device.threads");
  return c;
}

}  // namespace mpt::config
