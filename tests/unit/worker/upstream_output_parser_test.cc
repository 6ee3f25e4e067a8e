// UpstreamOutputParser and TrainerOutputReader on hand-written fixtures in upstream autoresearch
// train.py's print format: the startup prints, '\r'-separated progress updates, the `---` summary
// block, the FAIL fast-fail, nan losses, and malformed lines (counted, relayed as logs, never
// fatal).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "worker/trainer_output_reader.h"
#include "worker/upstream_output_parser.h"

namespace xv::worker {
namespace {

using nlohmann::json;

std::vector<json> OfType(const std::vector<json>& events, const std::string& type) {
  std::vector<json> out;
  for (const auto& e : events) {
    if (e["type"] == type) out.push_back(e);
  }
  return out;
}

// Feeds `lines`, one second apart, then Finish.
std::vector<json> ParseAll(UpstreamOutputParser* p, const std::vector<std::string>& lines) {
  std::vector<json> all;
  double t = 1000;
  for (const auto& line : lines) {
    for (auto& e : p->ParseLine(line, t)) all.push_back(std::move(e));
    t += 1;
  }
  for (auto& e : p->Finish(t)) all.push_back(std::move(e));
  return all;
}

const std::vector<std::string> kStartup = {
    "Vocab size: 8,192",
    "Model config: {'sequence_len': 2048, 'vocab_size': 8192, 'n_layer': 8, 'n_head': 4, "
    "'n_kv_head': 4, 'n_embd': 512, 'window_pattern': 'SSSL'}",
    "Parameter counts:",
    "  wte                     : 4,194,304",
    "  total                   : 50,331,648",
    "Estimated FLOPs per token: 3.221225e+08",
    "Time budget: 300s",
    "Gradient accumulation steps: 4",
};

const std::vector<std::string> kSummary = {
    "---",
    "val_bpb:          0.997900",
    "training_seconds: 300.1",
    "total_seconds:    325.9",
    "peak_vram_mb:     45060.2",
    "mfu_percent:      39.80",
    "total_tokens_M:   499.6",
    "num_steps:        953",
    "num_params_M:     50.3",
    "depth:            8",
};

TEST(UpstreamOutputParserTest, ProgressAndSummaryOfASuccessfulRun) {
  std::vector<std::string> lines = kStartup;
  // Upstream prints progress with end="\r": many updates arrive on one '\n'-terminated line.
  lines.push_back(
      "step 00000 (0.0%) | loss: 9.010913 | lrm: 1.00 | dt: 25012ms | tok/sec: 20,961 | mfu: 1.2% "
      "| epoch: 1 | remaining: 300s    \r"
      "step 00011 (1.1%) | loss: 7.120000 | lrm: 1.00 | dt: 312ms | tok/sec: 1,680,000 | mfu: "
      "38.0% "
      "| epoch: 1 | remaining: 297s    \r"
      "step 00042 (12.3%) | loss: 3.456789 | lrm: 1.00 | dt: 312ms | tok/sec: 1,234,567 | mfu: "
      "38.2% | epoch: 1 | remaining: 263s    \r");
  lines.push_back("");  // upstream's print() after the loop
  for (const auto& s : kSummary) lines.push_back(s);
  UpstreamOutputParser p(/*min_step_interval_s=*/0);
  std::vector<json> events = ParseAll(&p, lines);

  EXPECT_EQ(OfType(events, "log").size(), kStartup.size());
  std::vector<json> steps = OfType(events, "step");
  ASSERT_EQ(steps.size(), 3u);
  const json& s = steps[2];
  EXPECT_EQ(s["step"], 42);
  EXPECT_DOUBLE_EQ(s["loss"].get<double>(), 3.456789);
  EXPECT_DOUBLE_EQ(s["lrm"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(s["dt_ms"].get<double>(), 312);
  EXPECT_DOUBLE_EQ(s["tok_per_sec"].get<double>(), 1234567);
  EXPECT_DOUBLE_EQ(s["mfu_percent"].get<double>(), 38.2);
  EXPECT_EQ(s["epoch"], 1);
  EXPECT_NEAR(s["progress"].get<double>(), 0.123, 1e-12);
  EXPECT_DOUBLE_EQ(s["remaining_s"].get<double>(), 263);
  EXPECT_TRUE(s["t"].is_number());

  std::vector<json> summaries = OfType(events, "summary");
  ASSERT_EQ(summaries.size(), 1u);
  const json& sum = summaries[0];
  EXPECT_DOUBLE_EQ(sum["val_bpb"].get<double>(), 0.9979);
  EXPECT_DOUBLE_EQ(sum["training_seconds"].get<double>(), 300.1);
  EXPECT_DOUBLE_EQ(sum["total_seconds"].get<double>(), 325.9);
  EXPECT_DOUBLE_EQ(sum["peak_vram_mb"].get<double>(), 45060.2);
  EXPECT_DOUBLE_EQ(sum["mfu_percent"].get<double>(), 39.8);
  EXPECT_DOUBLE_EQ(sum["total_tokens_M"].get<double>(), 499.6);
  EXPECT_EQ(sum["num_steps"], 953);
  EXPECT_TRUE(sum["num_steps"].is_number_integer());
  EXPECT_DOUBLE_EQ(sum["num_params_M"].get<double>(), 50.3);
  EXPECT_EQ(sum["depth"], 8);
  // Mean of the progress figures after step 10 (steps 11 and 42).
  EXPECT_DOUBLE_EQ(sum["tok_per_sec"].get<double>(), (1680000.0 + 1234567.0) / 2);
  EXPECT_EQ(sum["metric_version"], "upstream");
  EXPECT_TRUE(p.summary_emitted());
  EXPECT_FALSE(p.diverged());
  EXPECT_EQ(p.malformed_lines(), 0);
  EXPECT_TRUE(OfType(events, "error").empty());
  // The summary comes after every step.
  EXPECT_EQ(events.back()["type"], "summary");
}

TEST(UpstreamOutputParserTest, StepEventsAreRateLimitedButTheLastOneAlwaysGoesOut) {
  UpstreamOutputParser p(/*min_step_interval_s=*/0.25);
  std::vector<json> events;
  for (int i = 0; i < 100; ++i) {  // 100 steps within 1 s
    char line[160];
    std::snprintf(line, sizeof(line),
                  "step %05d (%.1f%%) | loss: 4.000000 | lrm: 1.00 | dt: 10ms | tok/sec: 1,000 | "
                  "mfu: 1.0%% | epoch: 1 | remaining: 1s",
                  i, i * 1.0);
    for (auto& e : p.ParseLine(line, 1000 + i * 0.01)) events.push_back(std::move(e));
  }
  for (auto& e : p.Finish(1002)) events.push_back(std::move(e));
  std::vector<json> steps = OfType(events, "step");
  EXPECT_GE(steps.size(), 4u);
  EXPECT_LE(steps.size(), 6u);
  EXPECT_EQ(steps.front()["step"], 0);
  EXPECT_EQ(steps.back()["step"], 99);
}

TEST(UpstreamOutputParserTest, NanLossThenFailIsDiverged) {
  std::vector<std::string> lines = kStartup;
  lines.push_back(
      "step 00000 (0.0%) | loss: 9.010913 | lrm: 1.00 | dt: 25012ms | tok/sec: 20,961 | mfu: 1.2% "
      "| epoch: 1 | remaining: 300s\r"
      "step 00017 (2.0%) | loss: nan | lrm: 1.00 | dt: 312ms | tok/sec: 1,680,000 | mfu: 38.0% | "
      "epoch: 1 | remaining: 294s\r");
  lines.push_back("FAIL");
  UpstreamOutputParser p(0);
  std::vector<json> events = ParseAll(&p, lines);
  std::vector<json> nans = OfType(events, "nan");
  ASSERT_EQ(nans.size(), 1u);
  EXPECT_EQ(nans[0]["step"], 17);
  EXPECT_EQ(nans[0]["what"], "loss");
  EXPECT_EQ(nans[0]["value"], "nan");
  std::vector<json> errors = OfType(events, "error");
  ASSERT_EQ(errors.size(), 1u);  // FAIL's, not a second one at Finish
  EXPECT_EQ(errors[0]["kind"], "diverged");
  EXPECT_NE(errors[0]["message"].get<std::string>().find("non-finite loss (nan) at step 17"),
            std::string::npos)
      << errors[0].dump();
  EXPECT_TRUE(p.diverged());
  EXPECT_FALSE(p.summary_emitted());
  EXPECT_TRUE(OfType(events, "summary").empty());
}

TEST(UpstreamOutputParserTest, FailAloneAndExplodingLossAreDiverged) {
  {
    UpstreamOutputParser p(0);
    std::vector<json> events = ParseAll(
        &p, {"step 00003 (0.1%) | loss: 9.000000 | lrm: 1.00 | dt: 300ms | tok/sec: 1 | mfu: 1.0% "
             "| epoch: 1 | remaining: 299s",
             "FAIL"});
    EXPECT_TRUE(p.diverged());
    ASSERT_EQ(OfType(events, "error").size(), 1u);
    EXPECT_NE(p.divergence_detail().find("FAIL"), std::string::npos) << p.divergence_detail();
    EXPECT_NE(p.divergence_detail().find("step 3"), std::string::npos) << p.divergence_detail();
  }
  {
    // A loss above 100 without FAIL (the program was killed before printing it): Finish adds the
    // error event.
    UpstreamOutputParser p(0);
    std::vector<json> events =
        ParseAll(&p, {"step 00005 (0.2%) | loss: 123.500000 | lrm: 1.00 | dt: 300ms"});
    EXPECT_TRUE(p.diverged());
    std::vector<json> nans = OfType(events, "nan");
    ASSERT_EQ(nans.size(), 1u);
    EXPECT_EQ(nans[0]["value"], "123.5");
    ASSERT_EQ(OfType(events, "error").size(), 1u);
    EXPECT_EQ(OfType(events, "error")[0]["kind"], "diverged");
  }
  {
    UpstreamOutputParser p(0);
    ParseAll(&p, {"---", "val_bpb: nan", "num_steps: 3"});
    EXPECT_TRUE(p.diverged());
    EXPECT_FALSE(p.summary_emitted());
    EXPECT_EQ(p.divergence_detail(), "val_bpb is nan");
  }
}

// Integer fields printed as nan, inf or beyond int64 (found while writing tests/fuzz): converting
// those to an integer was undefined behaviour (INT64_MIN on x86, stored as the run's step count).
// They are now null in the summary and left out of the step event.
TEST(UpstreamOutputParserTest, IntegerFieldsWithoutAnIntegerValueAreNullOrLeftOut) {
  UpstreamOutputParser p(0);
  std::vector<json> events =
      ParseAll(&p, {"step 00003 (0.1%) | loss: 9.000000 | lrm: 1.00 | epoch: nan",
                    "step 00004 (0.2%) | loss: 8.000000 | epoch: 1e30", "---", "val_bpb: 1.25",
                    "num_steps: nan", "depth: 1e300"});
  std::vector<json> steps = OfType(events, "step");
  ASSERT_FALSE(steps.empty());
  for (const auto& s : steps) EXPECT_FALSE(s.contains("epoch")) << s.dump();
  std::vector<json> summary = OfType(events, "summary");
  ASSERT_EQ(summary.size(), 1u);
  EXPECT_TRUE(summary[0]["num_steps"].is_null()) << summary[0].dump();
  EXPECT_TRUE(summary[0]["depth"].is_null()) << summary[0].dump();
  EXPECT_EQ(summary[0]["val_bpb"], 1.25);
}

// "step" followed at once by '|' (found by tests/fuzz): the progress parser cut 5 characters off
// the 4-character part before the first '|', and std::out_of_range left ParseLine, ending the
// worker's read of the trainer's output. It is a malformed line now.
TEST(UpstreamOutputParserTest, StepFollowedByABarIsMalformedNotAnException) {
  UpstreamOutputParser p(0);
  std::vector<json> events;
  ASSERT_NO_THROW(events = ParseAll(&p, {"step | loss: 3.0", "step |", "step 00001 | loss: 2.5"}));
  EXPECT_EQ(p.malformed_lines(), 2);
  ASSERT_EQ(OfType(events, "log").size(), 2u);
  EXPECT_EQ(OfType(events, "log")[0]["text"], "step | loss: 3.0");
  ASSERT_EQ(OfType(events, "step").size(), 1u);
  EXPECT_EQ(OfType(events, "step")[0]["step"], 1);
}

TEST(UpstreamOutputParserTest, MalformedLinesAreCountedRelayedAndNeverFatal) {
  UpstreamOutputParser p(0);
  std::vector<json> events = ParseAll(
      &p, {
              "step abc (1.0%) | loss: 3.0 | lrm: 1.00",         // no step number
              "step 00007 (1.0%) | lrm: 1.00 | dt: 300ms",       // no loss
              "step 00008 (x%) | loss: 3.0",                     // bad percentage
              "step 00009 (1.0%) | loss: three | lrm: 1.00",     // loss not a number
              "step 00010 (1.0%) | loss: 3.000000 | lrm: oops",  // a bad optional field: kept
              "stepping up the learning rate",                   // plain text: a log, not malformed
              "---",
              "val_bpb:          0.997900",
              "peak_vram_mb:     lots",  // malformed in the block
              "num_steps:        953",
              "\x01\x02 binary junk \xff",
          });
  EXPECT_EQ(p.malformed_lines(), 5) << json(p.malformed_examples()).dump();
  EXPECT_EQ(p.malformed_examples().size(), 5u);
  std::vector<json> steps = OfType(events, "step");
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0]["step"], 10);
  EXPECT_FALSE(steps[0].contains("lrm"));
  std::vector<json> summaries = OfType(events, "summary");
  ASSERT_EQ(summaries.size(), 1u);
  EXPECT_DOUBLE_EQ(summaries[0]["val_bpb"].get<double>(), 0.9979);
  EXPECT_EQ(summaries[0]["num_steps"], 953);
  EXPECT_FALSE(summaries[0].contains("peak_vram_mb"));
  EXPECT_TRUE(p.summary_emitted());
  EXPECT_FALSE(p.diverged());
  // Every malformed or foreign line is relayed as a log (nothing printed is lost).
  EXPECT_EQ(OfType(events, "log").size(), 7u);
}

TEST(TrainerOutputReaderTest, AutoPassesXvEventsAndParsesUpstreamLines) {
  TrainerOutputReader r(TrainerOutputFormat::kAuto, 0);
  std::vector<TrainerOutputEvent> got;
  auto feed = [&](const std::string& line) {
    for (auto& e : r.ReadLine(line, 1000)) got.push_back(std::move(e));
  };
  const std::string start = R"({"type":"start","t":1.5,"config":{}})";
  feed(start);
  feed("step 00001 (0.5%) | loss: 5.000000 | lrm: 1.00 | dt: 300ms");
  feed("hello");
  feed("---");
  feed("val_bpb: 1.25");
  for (auto& e : r.Finish(1001)) got.push_back(std::move(e));
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[0].type, "start");
  EXPECT_EQ(got[0].json, start);  // verbatim
  EXPECT_EQ(got[1].type, "step");
  EXPECT_EQ(got[2].type, "log");
  EXPECT_EQ(got[3].type, "summary");
  EXPECT_TRUE(r.saw_summary());
}

TEST(TrainerOutputReaderTest, XvEventsFormatKeepsUpstreamTextAsLogs) {
  TrainerOutputReader r(TrainerOutputFormat::kXvEvents);
  auto a = r.ReadLine("step 00001 (0.5%) | loss: 5.000000", 1000);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].type, "log");
  auto b = r.ReadLine(R"({"type":"error","kind":"oom","message":"out of memory"})", 1000);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(r.error_message(), "out of memory");
  EXPECT_TRUE(r.Finish(1001).empty());
  EXPECT_FALSE(r.saw_summary());
}

TEST(TrainerOutputReaderTest, ADeeplyNestedEventLineIsRelayedAsALogLinesText) {
  // The issue's crash-looping line: an error event nested 100,000 deep. It is not an event the
  // daemon reads (over kMaxJsonDepth): its text travels in a log event, its structure never does,
  // and it does not become the attempt's error message.
  for (auto format : {TrainerOutputFormat::kXvEvents, TrainerOutputFormat::kAuto}) {
    TrainerOutputReader r(format);
    const std::string line = R"({"type":"error","kind":"crashed","message":)" +
                             std::string(100000, '[') + std::string(100000, ']') + "}";
    std::vector<TrainerOutputEvent> evs = r.ReadLine(line, 1.7e9);
    ASSERT_EQ(evs.size(), 1u);
    EXPECT_EQ(evs[0].type, "log");
    nlohmann::json j = nlohmann::json::parse(evs[0].json);
    EXPECT_EQ(j["text"], line);
    EXPECT_EQ(r.error_message(), "");
    // 64 levels is still an event.
    const std::string ok = R"({"type":"error","message":"oom","detail":)" + std::string(63, '[') +
                           std::string(63, ']') + "}";
    evs = r.ReadLine(ok, 1.7e9);
    ASSERT_EQ(evs.size(), 1u);
    EXPECT_EQ(evs[0].type, "error");
    EXPECT_EQ(evs[0].json, ok);
    EXPECT_EQ(r.error_message(), "oom");
  }
}

TEST(TrainerOutputReaderTest, UpstreamFormatTreatsJsonAsText) {
  TrainerOutputReader r(TrainerOutputFormat::kUpstream);
  auto a = r.ReadLine(R"({"type":"summary","val_bpb":1.0})", 1000);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].type, "log");
  EXPECT_FALSE(r.saw_summary());
}

TEST(ApplyOutputVerdictTest, DivergenceAndMissingSummary) {
  const AttemptOutcome crashed{"failed", "crashed", "exit code 1"};
  const AttemptOutcome ok{"succeeded", "", ""};
  TrainerOutputReader diverged(TrainerOutputFormat::kUpstream, 0);
  diverged.ReadLine("step 00002 (1.0%) | loss: nan", 1000);
  diverged.ReadLine("FAIL", 1000);
  AttemptOutcome o = ApplyOutputVerdict(crashed, KillReason::kNone, diverged, true);
  EXPECT_EQ(o.state, "diverged");
  EXPECT_EQ(o.failure_kind, "diverged");
  EXPECT_NE(o.failure_detail.find("step 2"), std::string::npos) << o.failure_detail;
  // A kill by the worker wins.
  EXPECT_EQ(
      ApplyOutputVerdict({"timed_out", "timed_out", "x"}, KillReason::kDeadline, diverged, true)
          .state,
      "timed_out");

  TrainerOutputReader silent(TrainerOutputFormat::kAuto, 0);
  silent.ReadLine("done", 1000);
  AttemptOutcome none = ApplyOutputVerdict(ok, KillReason::kNone, silent, true);
  EXPECT_EQ(none.state, "failed");
  EXPECT_NE(none.failure_detail.find("without a summary"), std::string::npos);
  // xv-train (libtorch) keeps its own contract.
  EXPECT_EQ(ApplyOutputVerdict(ok, KillReason::kNone, silent, false).state, "succeeded");
}

}  // namespace
}  // namespace xv::worker
