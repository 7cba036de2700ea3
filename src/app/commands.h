// The subcommands mpt's main dispatches to. Each returns the process exit code (src/common/error.h).
#pragma once

#include <string>
#include <vector>

namespace mpt::app {

struct TrainOptions {
  std::string spec_path;
  std::vector<std::string> overrides;
  std::string run_dir;          // empty: OUTPUT_ROOT/NAME
  std::string resume = "auto";  // auto | never | PATH
  int nproc = 1;                // > 1: start this many local ranks (torchrun --standalone)
  bool all_keys = false;        // the spec table lists every key, not only those that apply
};

int run_train(const TrainOptions& options);

struct AbCompareOptions {
  std::string a;  // a spec, or a finished run directory
  std::string b;
  std::vector<std::string> overrides;   // applied to both specs
  std::string out;                      // empty: OUTPUT_ROOT/ab-A-vs-B
  std::vector<std::string> allow_diff;  // spec keys (or "section.") besides precision.* that may differ
  int repeats = 1;                      // seeds per side, for the seed-to-seed noise
  double max_accuracy_drop = 0.005;
  int speed_rounds = 3;              // interleaved `mpt bench` rounds for the speed-up (0: the runs' means)
  int64_t max_batch_budget_mib = 0;  // > 0: also find each side's largest batch within this budget
};

// Exit 0 on PASS, 3 on FAIL, 1 when a run failed, 2 on bad usage.
int run_ab_compare(const AbCompareOptions& options);

struct NightlyOptions {
  std::string suite_path;
  std::string root;  // empty: runs/nightly/SUITE_NAME
};

// Exit 0 all ok, 1 a job failed, 3 a regression, 75 another night holds the lock, 2 a bad suite.
int run_nightly(const NightlyOptions& options);

struct BenchOptions {
  std::string spec_path;
  std::vector<std::string> overrides;
  int64_t steps = 30;
  int64_t warmup = 5;
  bool real_data = false;
  bool measure_peak = true;
  bool loader_only = false;
  bool json = false;
  std::string json_out;     // also write the JSON here (used by --max-batch trials)
  int64_t profile_ops = 0;  // --profile N: the top N ops by self time
  bool max_batch = false;
  int64_t memory_budget_mib = 8192;
};

// Measures a spec's training step (or, with max_batch, the largest batch per precision within a budget).
int run_bench(const BenchOptions& options);

// `mpt inspect`: the model a spec builds, its parameters per top-level module, total, and FLOPs per sample.
int run_inspect(const std::string& spec_path, const std::vector<std::string>& overrides, bool json, int ranks);

struct ExportOptions {
  std::string source;                  // a checkpoint file, or a run directory (its newest valid checkpoint)
  std::string format = "safetensors";  // safetensors | torch | hf
  std::string out;
  bool force = false;  // hf: replace the model files of a folder that holds some
};

// Writes a checkpoint's FP32 weights as safetensors or a PyTorch zip file with torchvision / HF names, or, for a
// BERT run, a Hugging Face model folder (config.json + model.safetensors) that from_pretrained loads.
int run_export(const ExportOptions& options);

// Evaluates the spec's model (weights from model.init_from) on the spec's test data: loss and accuracy.
int run_eval(const std::string& spec_path, const std::vector<std::string>& overrides, bool json);

// The environment check: what mpt can use here, what `mixed` resolves to, and what to fix. 0 when mpt can run.
int run_doctor();

// Prints every spec key with type, default and meaning; markdown for docs/spec.md.
int run_keys(bool markdown);

struct NumericsCommandOptions {
  std::string spec_path;
  std::vector<std::string> overrides;
  std::string from;  // a checkpoint or run directory whose weights to measure (else model.init_from, else the seed's)
  int64_t batches = 4;
  std::string formats = "bf16,fp16,fp8,mxfp8";
  bool no_alone = false;  // skip each layer alone in each format (one forward per layer, format and batch)
  std::string out;        // empty: OUTPUT_ROOT/numerics-NAME
  bool json = false;
};
// Per-layer precision loss of the spec's model under each format: table, numerics.json, numerics.html.
int run_numerics(const NumericsCommandOptions& options);

struct TokenizeOptions {
  std::string tokenizer;  // a tokenizer.json instead of vocab
  std::string vocab = "data/bert-base-uncased/vocab.txt";
  std::string input;   // a UTF-8 file, one text per line; "" or "-": standard input
  bool cased = false;  // keep case and accents (cased vocabularies)
  bool json = false;   // one JSON object per line: {"tokens": [...], "ids": [...]}
};
int run_tokenize(const TokenizeOptions& options);

}  // namespace mpt::app
