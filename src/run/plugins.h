// Puts every plug-in's spec keys into the key table before anything reads it: each model family's keys, presets
// (model.name's choices) and the keys it gives a meaning to; each dataset's name (data.name's choices) and keys;
// each GEMM format's recipes (precision.fp8.recipe's choices); each tracker's keys (tracking.<name>.*). Every
// command and the test runner call it first.
#pragma once

namespace mpt::run {

void install_plugins();  // once per process; later calls do nothing

}  // namespace mpt::run
