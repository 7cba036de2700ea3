// The A/B verdict on synthetic runs: what passes, what fails and why, exit codes, and the report outputs.
#include <catch2/catch.hpp>

#include <cmath>

#include "tests/support/helpers.h"
#include "tools/compare/comparison.h"
#include "tools/compare/report.h"

using namespace mpt::compare;

namespace {

// A run of 1000 steps logged every 10: loss decays from 2.3 to ~0.35 with `jitter` alternating noise.
RunRecord synthetic_run(const std::string& name, double accuracy, double samples_per_sec, double jitter = 0.002,
                        double loss_floor = 0.3) {
  RunRecord run;
  run.dir = "runs/" + name;
  run.name = name;
  run.status = "completed";
  for (int64_t step = 10; step <= 1000; step += 10) {
    const double sign = (step / 10) % 2 == 0 ? 1.0 : -1.0;
    const double loss = (2.0 * std::exp(-step / 200.0) + loss_floor) * (1.0 + jitter * sign);
    run.train_loss.steps.push_back(step), run.train_loss.values.push_back(loss);
    run.samples_per_sec.steps.push_back(step), run.samples_per_sec.values.push_back(samples_per_sec);
    run.loss_scale.steps.push_back(step), run.loss_scale.values.push_back(32768.0);
  }
  run.eval_accuracy = {{500, 1000}, {accuracy - 0.02, accuracy}};
  run.eval_loss = {{500, 1000}, {0.5, 0.4}};
  run.summary = {{"name", name},
                 {"status", "completed"},
                 {"steps", 1000},
                 {"skipped_steps", 0},
                 {"global_batch_size", 128},
                 {"precision", "fp32"},
                 {"eval", {{"accuracy", accuracy}, {"loss", 0.4}}},
                 {"train", {{"loss", loss_floor}}},
                 {"samples_per_sec", samples_per_sec},
                 {"step_time_ms", {{"median", 128000.0 / samples_per_sec}}},
                 {"peak_memory_bytes", 500 << 20},
                 {"loss_scale", {{"mode", "none"}, {"final", 1.0}, {"min", 1.0}, {"backoffs", 0}, {"growths", 0}}}};
  return run;
}

bool mentions(const std::vector<std::string>& lines, const std::string& text) {
  for (const auto& line : lines)
    if (line.find(text) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("equal runs within the accuracy bar PASS and report the speed-up", "[fast][compare]") {
  Comparison c = compare_runs({synthetic_run("fp32", 0.9000, 30000)}, {synthetic_run("mixed", 0.8970, 54000)}, {});
  CHECK(c.verdict == Verdict::kPass);
  CHECK(verdict_exit_code(c.verdict) == 0);
  CHECK(c.failures.empty());
  CHECK(c.accuracy_gap == Approx(-0.003));
  CHECK(c.relative_accuracy_gap == Approx(-0.003 / 0.9));
  CHECK(c.speedup == Approx(1.8));
  CHECK(c.step_time_ratio == Approx(30000.0 / 54000.0));
  CHECK(c.memory_ratio == Approx(1.0));
  REQUIRE(c.a.steps_to_target.has_value());
  REQUIRE(c.b.steps_to_target.has_value());
  CHECK(*c.a.steps_to_target == *c.b.steps_to_target);
  CHECK(*c.a.steps_to_target >= 800);                      // the target is A's own smoothed loss at 90% of training
  CHECK(*c.b.seconds_to_target < *c.a.seconds_to_target);  // same steps, faster steps
  CHECK(c.a.roughness == Approx(c.b.roughness));
}

TEST_CASE("interleaved timing rounds replace the runs' means in the speed-up, with their spread noted",
          "[fast][compare]") {
  Comparison c = compare_runs({synthetic_run("fp32", 0.9000, 30000)}, {synthetic_run("mixed", 0.8970, 15000)}, {});
  CHECK(c.speedup == Approx(0.5));  // a busy machine during B's run
  CHECK(c.speed_source == "training");
  use_speed_rounds(c, SpeedRounds{{100, 110, 90}, {140, 160, 120}});
  CHECK(c.speed_source == "interleaved");
  REQUIRE(c.speed_ratios.size() == 3);
  CHECK(c.speedup == Approx(1.4));  // median of 1.4, 1.4545, 1.3333
  CHECK_THAT(c.notes.back(), Catch::Contains("median of 3 interleaved `mpt bench` rounds (B/A 1.33x to 1.45x)") &&
                                 Catch::Contains("the training runs' own means gave 0.50x"));
  CHECK(to_json(c)["speed"]["round_ratios"].size() == 3);
}

TEST_CASE("an accuracy drop beyond the bar FAILs with exit code 3, and a gain beyond it is only noted",
          "[fast][compare]") {
  Comparison drop = compare_runs({synthetic_run("fp32", 0.90, 1)}, {synthetic_run("mixed", 0.89, 1)}, {});
  CHECK(drop.verdict == Verdict::kFail);
  CHECK(verdict_exit_code(drop.verdict) == 3);
  CHECK(mentions(drop.failures, "1.00% below the baseline's 0.9000 (allowed: 0.50%)"));

  Thresholds loose;
  loose.max_accuracy_drop = 0.02;
  CHECK(compare_runs({synthetic_run("fp32", 0.90, 1)}, {synthetic_run("mixed", 0.89, 1)}, loose).verdict ==
        Verdict::kPass);

  Comparison gain = compare_runs({synthetic_run("fp32", 0.89, 1)}, {synthetic_run("mixed", 0.90, 1)}, {});
  CHECK(gain.verdict == Verdict::kPass);
  CHECK(mentions(gain.notes, "above A's"));
}

TEST_CASE("a rough loss curve, a plateau above the target, or an overflow storm FAIL", "[fast][compare]") {
  Comparison rough = compare_runs({synthetic_run("fp32", 0.9, 1, 0.002)}, {synthetic_run("mixed", 0.9, 1, 0.01)}, {});
  CHECK(rough.verdict == Verdict::kFail);
  CHECK(mentions(rough.failures, "as rough as A's"));

  Comparison plateau = compare_runs({synthetic_run("fp32", 0.9, 1)}, {synthetic_run("mixed", 0.9, 1, 0.002, 0.5)}, {});
  CHECK(plateau.verdict == Verdict::kFail);
  CHECK_FALSE(plateau.b.steps_to_target.has_value());
  CHECK(mentions(plateau.failures, "never reached the baseline's loss"));
  // Missing the target by a hair at the end (~1% here) is noise, not slower convergence.
  Comparison hair = compare_runs({synthetic_run("fp32", 0.9, 1)}, {synthetic_run("mixed", 0.9, 1, 0.002, 0.312)}, {});
  CHECK_FALSE(hair.b.steps_to_target.has_value());
  CHECK(hair.verdict == Verdict::kPass);

  RunRecord storm = synthetic_run("mixed", 0.9, 1);
  storm.summary["skipped_steps"] = 80;
  storm.nonfinite_grad_params = {{"hidden.0.weight", 80}, {"head.bias", 3}};
  Comparison c = compare_runs({synthetic_run("fp32", 0.9, 1)}, {storm}, {});
  CHECK(c.verdict == Verdict::kFail);
  CHECK(mentions(c.failures, "skipped 80 of 1000 optimizer steps (8.00%)"));
  REQUIRE(c.suspects.size() == 2);
  CHECK(c.suspects[0].rfind("hidden.0.weight", 0) == 0);  // most frequent first
  CHECK(mentions(c.notes, "precision.fp32_modules"));
}

TEST_CASE("a diverged candidate FAILs, and a baseline that did not finish is a failed run", "[fast][compare]") {
  RunRecord diverged = synthetic_run("mixed", 0.1, 1);
  diverged.status = "diverged";
  diverged.diagnosis = "loss scale collapsed to the floor";
  diverged.nonfinite_activation_modules = {{"hidden.0", 10}};
  Comparison c = compare_runs({synthetic_run("fp32", 0.9, 1)}, {diverged}, {});
  CHECK(c.verdict == Verdict::kFail);
  CHECK(mentions(c.failures, "diverged: loss scale collapsed"));
  CHECK(mentions(c.suspects, "hidden.0 (first non-finite forward output"));

  RunRecord interrupted = synthetic_run("fp32", 0.9, 1);
  interrupted.status = "interrupted";
  Comparison broken = compare_runs({interrupted}, {synthetic_run("mixed", 0.9, 1)}, {});
  CHECK(broken.verdict == Verdict::kRunFailed);
  CHECK(verdict_exit_code(broken.verdict) == 1);
}

TEST_CASE("repeats: means over seeds and the pooled seed-to-seed noise", "[fast][compare]") {
  Comparison c =
      compare_runs({synthetic_run("a", 0.90, 1), synthetic_run("a", 0.91, 1), synthetic_run("a", 0.89, 1)},
                   {synthetic_run("b", 0.90, 1), synthetic_run("b", 0.90, 1), synthetic_run("b", 0.90, 1)}, {});
  CHECK(c.repeats == 3);
  CHECK(c.a.accuracy == Approx(0.90));
  CHECK(c.a.accuracy_stddev == Approx(0.01));
  CHECK(c.b.accuracy_stddev == 0.0);
  CHECK(c.accuracy_noise == Approx(std::sqrt(0.01 * 0.01 / 2)));
  CHECK(mentions(c.notes, "seed-to-seed noise (pooled std over 3 seeds): 0.71%"));
}

TEST_CASE("compare.json, compare.md and report.html carry the verdict, every number and every chart",
          "[fast][compare]") {
  RunRecord a = synthetic_run("fp32 <base>", 0.9012, 30000);
  RunRecord b = synthetic_run("mixed & fast", 0.8991, 54000);
  b.summary["loss_scale"] = {
      {"mode", "dynamic"}, {"final", 65536.0}, {"min", 16384.0}, {"backoffs", 1}, {"growths", 2}};
  b.scale_events = {{300, "backoff", 16384.0}, {500, "growth", 32768.0}};
  Comparison c = compare_runs({a}, {b}, {});
  c.allowed_differences = {"optimizer.lr: 0.001 in A, 0.002 in B"};

  nlohmann::json json = to_json(c);
  CHECK(json["verdict"] == "PASS");
  CHECK(json["exit_code"] == 0);
  CHECK(json["a"]["accuracy"] == Approx(0.9012));
  CHECK(json["b"]["loss_scale"]["backoffs"] == 1);
  CHECK(json["speedup"] == Approx(1.8));
  CHECK(json["definitions"].size() == 5);
  CHECK(json["allowed_differences"].size() == 1);

  const std::string markdown = render_markdown(c);
  CHECK_THAT(markdown, Catch::Contains("| test accuracy | 0.9012 | 0.8991 | -0.21% |"));
  CHECK_THAT(markdown, Catch::Contains("| samples/s | 30000 | 54000 | 1.80x |"));
  CHECK_THAT(markdown, Catch::Contains("dynamic 2^16, min 2^14, 1 backoffs, 2 growths, 0 skipped"));
  CHECK_THAT(markdown, Catch::Contains("optimizer.lr: 0.001 in A, 0.002 in B"));
  CHECK_THAT(render_terminal(c), Catch::Contains("verdict: PASS"));

  const std::string html = render_html(c, a, b);
  CHECK(mpt::testing::markup_problem(html).empty());
  INFO(mpt::testing::markup_problem(html));
  for (const char* id : {"chart-loss", "chart-eval", "chart-loss-scale", "chart-throughput", "summary", "verdict"})
    CHECK_THAT(html, Catch::Contains(std::string("id=\"") + id + "\""));
  CHECK_THAT(html, Catch::Contains("fp32 &lt;base&gt;"));  // names are escaped
  CHECK_THAT(html, Catch::Contains("mixed &amp; fast"));
  CHECK_THAT(html, Catch::Contains("B: backoff at step 300 to 16384"));  // the backoff marker's tooltip
  for (const char* number : {"0.9012", "0.8991", "-0.21%", "1.80x", "30000", "54000"})
    CHECK_THAT(html, Catch::Contains(number));
  CHECK(html.find("<script") == std::string::npos);
  CHECK(html.find("http://") == html.find("http://www.w3.org/2000/svg"));  // nothing fetched from elsewhere
}

TEST_CASE(
    "the memory answer is the training steps' peak, with evaluation, checkpoint and process peaks shown apart, "
    "and the max-batch row once measured",
    "[fast][compare]") {
  RunRecord fp32 = synthetic_run("fp32", 0.9, 30000), mixed = synthetic_run("mixed", 0.9, 30000);
  // Evaluation and the checkpoint write need more than training, and about the same on both sides.
  fp32.summary["peak_memory_bytes"] = 876 << 20;
  fp32.summary["memory"] = {{"kind", "RSS"},
                            {"training_peak_bytes", 876 << 20},
                            {"evaluation_peak_bytes", 1400 << 20},
                            {"checkpoint_peak_bytes", 1453 << 20},
                            {"process_peak_bytes", 1800 << 20}};
  mixed.summary["peak_memory_bytes"] = 696 << 20;
  mixed.summary["memory"] = {{"kind", "RSS"},
                             {"training_peak_bytes", 696 << 20},
                             {"evaluation_peak_bytes", 1410 << 20},
                             {"checkpoint_peak_bytes", 1460 << 20},
                             {"process_peak_bytes", 1810 << 20}};
  Comparison c = compare_runs({fp32}, {mixed}, {});
  CHECK(c.memory_ratio == Approx(696.0 / 876.0));
  CHECK(c.b.checkpoint_peak_bytes == Approx(1460.0 * (1 << 20)));
  std::string md = render_markdown(c);
  CHECK_THAT(md, Catch::Contains("| peak memory, training steps | 876 MiB | 696 MiB | 0.79x |"));
  CHECK_THAT(md, Catch::Contains("| peak memory, eval / checkpoint | 1400 / 1453 MiB | 1410 / 1460 MiB |"));
  CHECK_THAT(md, Catch::Contains("| peak memory, whole process | 1800 MiB | 1810 MiB |"));
  CHECK_THAT(md, !Catch::Contains("max batch"));

  use_max_batch(c, 2048ll << 20, 256, 320);
  md = render_markdown(c);
  CHECK_THAT(md, Catch::Contains("| max batch within 2048 MiB | 256 | 320 | 1.25x |"));
  const nlohmann::json json = to_json(c);
  CHECK(json["a"]["max_batch"] == 256);
  CHECK(json["b"]["memory"]["evaluation_peak_bytes"] == 1410 << 20);
  CHECK(json["max_batch_budget_bytes"] == 2048ll << 20);
}
