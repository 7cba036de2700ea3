// `mpt eval SPEC [key=value ...]`: the spec's model with the weights of model.init_from, evaluated on the spec's
// test split in the spec's precision. For models trained elsewhere (torchvision, HF) or a run's checkpoint.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <iostream>

#include "app/commands.h"
#include "common/error.h"
#include "hardware/hardware.h"
#include "io/weights.h"
#include "models/registry.h"
#include "run/resolve.h"
#include "run/sections.h"
#include "train/evaluate.h"

namespace mpt::app {

int run_eval(const std::string& spec_path, const std::vector<std::string>& overrides, bool json) {
  const run::ExperimentConfig c = run::read_sections(run::load_resolved_spec(spec_path, overrides));
  if (c.model.init_from.empty())
    throw UsageError(
        "mpt eval needs weights: set model.init_from=FILE (an mpt checkpoint, safetensors or a "
        "PyTorch file)");
  hardware::configure_threads(static_cast<int>(c.device.threads));
  const torch::Device device(c.device.type == "cuda" ? torch::kCUDA : torch::kCPU);
  hardware::configure_cuda_math(device.is_cuda() && c.precision.tf32);
  torch::manual_seed(c.experiment.seed);

  const data::Dataset test_set = data::load_dataset(c.data, "test");
  models::Model model =
      models::build_model(c.model, data::sample_shape(c.data), precision::ModulePolicy(c.precision.fp32_modules));
  const io::InitReport init =
      io::init_from_weights(*model, io::read_weights(c.model.init_from), c.model.init_from, c.model.init_skip,
                            models::model_family(c.model.name).hf_base_prefix);
  if (!init.fresh.empty())
    std::cerr << "mpt: warning: " << c.model.init_from << ": " << io::describe(init)
              << " (untrained tensors make these numbers meaningless)\n";
  model->to(device);
  const train::EvalMetrics metrics =
      train::evaluate(*model, test_set, device, precision::compute_dtype(c.precision.mode), c.train.eval_batch_size);
  if (json) {
    std::cout << nlohmann::ordered_json{{"model", c.model.name},
                                        {"weights", c.model.init_from},
                                        {"precision", precision::mode_name(c.precision.mode)},
                                        {"samples", metrics.samples},
                                        {"loss", metrics.loss},
                                        {"accuracy", metrics.accuracy}}
                     .dump(2)
              << "\n";
  } else {
    std::cout << fmt::format("{} ({}) from {}: loss {:.4f}, accuracy {:.4f} on {} {} samples\n", c.model.name,
                             precision::mode_name(c.precision.mode), c.model.init_from, metrics.loss, metrics.accuracy,
                             metrics.samples, c.data.name);
  }
  return kExitOk;
}

}  // namespace mpt::app
