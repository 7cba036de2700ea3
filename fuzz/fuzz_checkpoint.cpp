// A checkpoint as a resume loads it into a model and an optimizer: the input is the file (the streamed format's
// records, or the first format's zip). Its records are checked in a first pass before its CRC is (the CRC ends the
// file), so mutated records reach every check; what passes must load, and anything else be a clear refusal.
#include "fuzz/harness.h"
#include "io/checkpoint.h"

namespace {

struct Small {
  torch::nn::Sequential model{torch::nn::Linear(4, 3), torch::nn::BatchNorm1d(3)};
  torch::optim::Adam optimizer{model->parameters(), torch::optim::AdamOptions(0.1)};
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = mpt::fuzz::scratch_file(data, size, "checkpoint.mpt");
  Small small;
  mpt::fuzz::refusals_only([&] {
    mpt::io::load_checkpoint(path, mpt::io::tensors_of(*small.model), small.optimizer);
    // Loaded: the optimizer steps on what it was given.
    small.optimizer.zero_grad();
    small.model->forward(torch::ones({2, 4})).sum().backward();
    small.optimizer.step();
  });
  mpt::fuzz::refusals_only([&] { (void)mpt::io::verify_checkpoint(path); });
  return 0;
}
