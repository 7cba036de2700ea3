// Test helpers: run the real `mpt` binary, read JSONL/JSON outputs, make scratch folders.
#pragma once

#include <ATen/Parallel.h>
#include <nlohmann/json.hpp>

#include <iostream>
#include <string>
#include <vector>

#include "common/error.h"
#include "data/dataset.h"

// Ends the running test as *skipped*: ctest matches the line (SKIP_REGULAR_EXPRESSION, tests/CMakeLists.txt)
// and reports the test skipped, never passed. For a dependency or a device this machine lacks.
#define MPT_SKIP(reason)                                 \
  do {                                                   \
    std::cout << "MPT-SKIPPED: " << reason << std::endl; \
    return;                                              \
  } while (0)

namespace mpt::testing {

struct CommandResult {
  int exit_code;
  std::string output;  // stdout and stderr together
};

// Runs `mpt ARGS...` (each argument shell-quoted) and captures its output and exit code.
CommandResult run_mpt(const std::vector<std::string>& args);

// Same as run_mpt with environment changes given as `env` arguments: "OPENBLAS_CORETYPE=Haswell", "-u VAR".
CommandResult run_mpt_with_env(const std::string& env_arguments, const std::vector<std::string>& args);

// Same as run_mpt with standard input read from `input_path` (a file, /dev/zero, ...).
CommandResult run_mpt_with_input(const std::string& input_path, const std::vector<std::string>& args);

// Same as run_mpt, in a shell whose file-size limit is `max_file_kib`: a disk that fills up. mpt ignores SIGXFSZ
// itself, so writes past the limit fail with EFBIG and a message.
CommandResult run_mpt_with_file_limit(const std::vector<std::string>& args, int64_t max_file_kib);

// Starts `mpt ARGS...` in its own process group, output to `log_path`, without waiting; returns its pid.
int start_mpt(const std::vector<std::string>& args, const std::string& log_path);
// Starts PROGRAM ARGS... (program[0] a path) the same way.
int start_program(const std::vector<std::string>& program, const std::string& log_path);
// kill -9 of the whole process group started by start_mpt (the power cut), then reaps it.
void kill_hard(int pid);
// Waits for a start_mpt process; returns its exit code.
int wait_mpt(int pid);

// A fresh empty folder under the system temp dir, named after the test.
std::string scratch_dir(const std::string& name);

std::vector<nlohmann::json> read_jsonl(const std::string& path);
nlohmann::json read_json(const std::string& path);

// A metrics.jsonl column for lines of one kind ("train" or "eval"), keyed by step.
std::vector<std::pair<int64_t, double>> metric_series(const std::string& run_dir, const std::string& field);

std::string read_file_text(const std::string& path);

// What a resume left in a run directory's events.jsonl: the reason `checkpoint` was rejected ("" when it was not)
// and the step the run resumed at (-1 when it did not).
struct ResumeRecord {
  std::string rejection;
  int64_t resumed_at = -1;
};
ResumeRecord resume_record(const std::string& run_dir, const std::string& checkpoint);

// An independent well-formedness check for mpt's XHTML-style pages: every tag closed in order, no stray '<'
// or '&'. Returns "" when the page is well formed, else what is wrong and where.
std::string markup_problem(const std::string& page);
std::string source_path(const std::string& relative);  // a path inside the source tree

// The Python of the torch environment mpt was built against: its torch, torchvision, transformers, tokenizers,
// safetensors and tensorboard are the tests' oracles (scripts/test.sh installs them).
std::string python();
// Runs `python ARGS` (already shell-quoted as needed); returns its exit status and combined output.
CommandResult run_python(const std::string& args);
// "" when `python` imports every module of the space-separated `modules`, else what is missing.
std::string python_missing(const std::string& modules);

// Runs `body` with `threads` intra-op threads in LibTorch's pool and restores the previous count after, also when
// the body throws (a failed REQUIRE).
template <class Body>
void with_threads(int threads, Body body) {
  struct Restore {
    int before = at::get_num_threads();
    ~Restore() { at::set_num_threads(before); }
  } restore;
  at::set_num_threads(threads);
  body();
}

// The message of the mpt::Error `body` throws; "(no mpt::Error was thrown)", which no expected message contains,
// when it returns.
template <class Body>
std::string error_of(Body&& body) {
  try {
    body();
  } catch (const mpt::Error& e) {
    return e.what();
  }
  return "(no mpt::Error was thrown)";
}

// The sample shape of `channels` x `size` x `size` images in `classes` classes, for building image models.
data::SampleShape image_sample(int64_t channels, int64_t size, int64_t classes);
const std::string kFashionMnistRoot = "/usr/share/datasets/fashion-mnist";

}  // namespace mpt::testing
