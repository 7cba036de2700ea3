// precision.fp8.*: how FP8 layers scale their tensors (precision/fp8.h).
#pragma once

#include <cstdint>
#include <string>

namespace mpt::precision {

struct Fp8Config {
  std::string recipe = "delayed";  // delayed (Transformer Engine's) | current (torchao's default)
  int64_t amax_history = 16;       // delayed: steps of amax history the scale is taken from
  int64_t margin = 0;              // scale = max / amax / 2^margin
};

}  // namespace mpt::precision
