// config::Spec resolution: every decision "auto" stands for is made here once, recorded with its reason as the
// value's origin, and written to the run directory's config.yaml. The decisions themselves belong to their
// components (precision/mode.h, the dataset and model tables); this file asks them and collects the problems.
#include "run/resolve.h"

#include "run/auto_islands.h"

#include <algorithm>
#include <filesystem>

#include "common/error.h"
#include "common/files.h"
#include "config/load.h"
#include "config/relevance.h"
#include "data/datasets.h"
#include "io/weights.h"
#include "models/registry.h"
#include "precision/mode.h"
#include "run/sections.h"
#include "run/spec_paths.h"

namespace mpt::run {
namespace {

using Problems = std::vector<std::string>;

std::string at(const config::Spec& spec, const std::string& key) { return spec.origin(key) + ": " + key; }

// device.type and distributed.backend; returns whether the run is on CUDA.
bool resolve_device(config::Spec& spec, const hardware::Facts& facts, Problems& problems) {
  std::string device = spec.get_string("device.type");
  if (device == "auto") {
    device = facts.cuda_available ? "cuda" : "cpu";
    spec.set("device.type", YAML::Node(device), facts.cuda_available ? "auto: CUDA available" : "auto: no CUDA");
  } else if (device == "cuda" && !facts.cuda_available) {
    problems.push_back(at(spec, "device.type") +
                       " = cuda, but this build or machine has no CUDA device; use cpu or auto");
  }
  const bool cuda = device == "cuda";
  const std::string backend = spec.get_string("distributed.backend");
  if (backend == "auto")
    spec.set("distributed.backend", YAML::Node(cuda ? "nccl" : "gloo"),
             cuda ? "auto: CUDA tensors" : "auto: CPU tensors");
  else if (backend == "nccl" && !cuda)
    problems.push_back(at(spec, "distributed.backend") +
                       " = nccl needs device.type cuda (NCCL moves CUDA tensors); use gloo or auto on CPU");
  return cuda;
}

// precision.mode, precision.strategy and precision.loss_scale.mode, each by precision/mode.h's rules.
void resolve_precision(config::Spec& spec, bool cuda, const hardware::Facts& facts, Problems& problems) {
  if (spec.get_string("precision.mode") == "mixed") {
    const auto choice = precision::choose_mixed(cuda, facts);
    spec.set("precision.mode", YAML::Node(precision::mode_name(choice.value)), "mixed: " + choice.reason);
  }
  const precision::Mode mode = precision::parse_mode(spec.get_string("precision.mode"));
  if (const std::string why = precision::mode_problem(mode, cuda); !why.empty())
    problems.push_back(at(spec, "precision.mode") + " = " + why);
  if (spec.get_string("precision.strategy") == "auto") {
    const auto choice = precision::choose_strategy(mode, cuda);
    spec.set("precision.strategy", YAML::Node(precision::strategy_name(choice.value)), choice.reason);
  }
  if (const std::string why =
          precision::strategy_problem(precision::parse_strategy(spec.get_string("precision.strategy")), mode);
      !why.empty())
    problems.push_back(at(spec, "precision.strategy") + " = " + why);
  if (spec.get_string("precision.loss_scale.mode") == "auto") {
    const auto choice = precision::choose_loss_scale(mode);
    spec.set("precision.loss_scale.mode", YAML::Node(precision::loss_scale_mode_name(choice.value)), choice.reason);
  }
}

// Keys whose values only make sense together: the loss scale's range, the train length, channels.
// A default precision.fp32_modules, or one holding auto, keeps the model family's own output layers and norms in FP32
// too.
void add_family_islands(config::Spec& spec) {
  const std::string key = "precision.fp32_modules";
  std::vector<std::string> patterns = spec.get_string_list(key);
  if (spec.origin(key) != "default" && std::find(patterns.begin(), patterns.end(), "auto") == patterns.end()) return;
  const models::ModelFamily& family = models::model_family(spec.get_string("model.name"));
  const size_t before = patterns.size();
  for (const std::string& island : family.fp32_modules)
    if (std::find(patterns.begin(), patterns.end(), island) == patterns.end()) patterns.push_back(island);
  if (patterns.size() > before)
    spec.set(key, YAML::Node(patterns), "default, with the " + family.title + " family's FP32 islands");
}

void check_combinations(const config::Spec& spec, Problems& problems) {
  const double init = spec.get_float("precision.loss_scale.init");
  if (init < spec.get_float("precision.loss_scale.min_scale") ||
      init > spec.get_float("precision.loss_scale.max_scale"))
    problems.push_back(at(spec, "precision.loss_scale.init") + " = " + spec.value_text("precision.loss_scale.init") +
                       ": expected a value between precision.loss_scale.min_scale and max_scale");
  if (spec.get_int("train.epochs") == 0 && spec.get_int("train.max_steps") == 0)
    problems.push_back(at(spec, "train.epochs") + " and train.max_steps are both 0; set one to a positive number");
  if (spec.get_int("data.channels") == 2)
    problems.push_back(at(spec, "data.channels") + " = 2: expected 0 (native), 1, or 3 (grayscale replicated to RGB)");
}

// A key given a value that nothing reads under the other keys is a mistake the run would hide: a recipe under a
// mode without it, an optimizer's setting under another optimizer.
void check_inert_keys(const config::Spec& spec, Problems& problems) {
  for (const config::InertKey& inert : config::inert_keys(spec))
    problems.push_back(at(spec, inert.key) + " = " + spec.value_text(inert.key) +
                       " does nothing here: it applies when " + inert.deciding_key + " is " + inert.applies_under +
                       ", and " + inert.deciding_key + " is " + inert.deciding_value + " (" +
                       spec.origin(inert.deciding_key) + "); remove it or change " + inert.deciding_key);
}

// The files the dataset and the model need, and whether the model reads what the dataset holds.
void check_data_and_model(const config::Spec& spec, Problems& problems) {
  const ExperimentConfig c = read_sections(spec);
  const data::DatasetKind& data = data::dataset_kind(c.data.name);
  for (const data::DataProblem& problem : data.check_files(c.data))
    problems.push_back(at(spec, problem.key) + " = " + problem.message);
  if (!c.model.init_from.empty()) {
    const std::string file = io::weights_file_in(c.model.init_from);  // a Hugging Face folder: the file in it
    const std::string why = file.empty() ? io::kNoWeightsInFolder : path_problem(file, PathKind::kFile);
    if (!why.empty()) problems.push_back(at(spec, "model.init_from") + " = " + c.model.init_from + ": " + why);
  }
  const models::ModelFamily& family = models::model_family(c.model.name);
  if (family.check)
    for (const models::ModelProblem& problem : family.check(c.model))
      problems.push_back(at(spec, problem.key) + " = " + problem.message);
  if (std::find(family.recomputes.begin(), family.recomputes.end(), c.memory.activation_checkpointing) ==
      family.recomputes.end())
    problems.push_back(at(spec, "memory.activation_checkpointing") + " = " +
                       models::recompute_name(c.memory.activation_checkpointing) + ": " + family.prefix +
                       (family.recomputes.size() == 1 ? " has no blocks to recompute; expected none"
                                                      : " recomputes whole blocks only; expected none or full"));
  if (family.modality != data.modality)
    problems.push_back(at(spec, "model.name") + " = " + c.model.name + ": " + models::modality_mismatch(family));
}

}  // namespace

void resolve_spec(config::Spec& spec, const hardware::Facts& facts) {
  Problems problems;
  const bool cuda = resolve_device(spec, facts, problems);
  resolve_precision(spec, cuda, facts, problems);
  add_family_islands(spec);
  if (spec.get_string("experiment.name").empty())
    spec.set("experiment.name", YAML::Node(std::filesystem::path(spec.source_path()).stem().string()),
             "the spec file's name");
  check_combinations(spec, problems);
  check_inert_keys(spec, problems);
  const std::map<std::string, std::string> looked = resolve_relative_paths(spec);
  check_data_and_model(spec, problems);
  for (std::string& problem : problems)  // a relative path found nowhere: say where it was looked for
    for (const auto& [key, places] : looked)
      if (problem.rfind(at(spec, key), 0) == 0) problem += " (a relative path; looked in " + places + ")";
  config::throw_if_errors(spec.source_path(), problems);
}

config::Spec load_resolved_spec(const std::string& path, const std::vector<std::string>& overrides) {
  config::Spec spec = config::load_spec(path, overrides);
  resolve_spec(spec, hardware::probe());
  resolve_auto_islands(spec);
  return spec;
}

}  // namespace mpt::run
