// `mpt numerics SPEC [key=value ...] [--from RUN|CKPT] [--batches N] [--formats ...]`: which projection loses how much
// in each candidate format, measured on the spec's own data (run/numerics.h); a table sorted by damage, and
// numerics.json and numerics.html in the output folder.
#include <fmt/format.h>

#include <filesystem>
#include <iostream>

#include "app/checkpoint_source.h"
#include "app/commands.h"
#include "common/echo.h"
#include "common/error.h"
#include "common/files.h"
#include "hardware/hardware.h"
#include "run/numerics_report.h"
#include "run/resolve.h"
#include "run/sections.h"
#include "tools/tracking/tracker.h"

namespace mpt::app {

int run_numerics(const NumericsCommandOptions& options) {
  run::ExperimentConfig c = run::read_sections(run::load_resolved_spec(options.spec_path, options.overrides));
  if (!options.from.empty()) c.model.init_from = checkpoint_in(options.from);
  const auto trackers = tracking::open_trackers(c.tracking, {"mpt numerics " + options.spec_path});
  hardware::configure_threads(static_cast<int>(c.device.threads));
  const torch::Device device(c.device.type == "cuda" ? torch::kCUDA : torch::kCPU);
  run::NumericsOptions measure;
  measure.batches = options.batches;
  measure.formats = precision::parse_formats(options.formats, "--formats");
  measure.alone = !options.no_alone;
  const run::NumericsReport report = run::measure_numerics(c, measure, device);

  const std::string out =
      options.out.empty() ? c.experiment.output_root + "/numerics-" + c.experiment.name : options.out;
  std::filesystem::create_directories(out);
  const nlohmann::ordered_json json = run::numerics_json(report);
  write_file_atomically(out + "/numerics.json", json.dump(2) + "\n");
  write_file_atomically(out + "/numerics.html", run::numerics_html(report));
  for (const auto& tracker : trackers)
    tracker->deliver(out, "numerics",
                     [](const std::string& line) { std::cerr << "numerics: " << terminal_safe(line) << "\n"; });
  if (options.json)
    std::cout << json.dump(2) << "\n";
  else
    std::cout << run::numerics_table(report) << fmt::format("\nwrote {0}/numerics.json and {0}/numerics.html\n", out);
  return kExitOk;
}

}  // namespace mpt::app
