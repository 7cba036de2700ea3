// The progress line: values not measured yet read "-", never a zero that looks like a measurement.
#include <catch2/catch.hpp>

#include <limits>

#include "io/log.h"

using mpt::io::format_progress;
using mpt::io::ProgressLine;

TEST_CASE("the progress line shows '-' for what is not measured yet, then the values", "[fast][io]") {
  const double unknown = std::numeric_limits<double>::quiet_NaN();
  CHECK(format_progress(ProgressLine{0, 100, unknown, 32768, 0.001, 0.0, 0.0}) ==
        "step 0/100  loss -  scale 32768  lr 0.001  - samples/s  eta -");
  CHECK(format_progress(ProgressLine{3, 100, unknown, 32768, 0.001, 2560.0, 38.8}) ==
        "step 3/100  loss -  scale 32768  lr 0.001  2560 samples/s  eta 0m39s");
  CHECK(format_progress(ProgressLine{50, 100, 0.4321, 65536, 0.0005, 3000.0, 125.0}) ==
        "step 50/100  loss 0.4321  scale 65536  lr 0.0005  3000 samples/s  eta 2m05s");
}
