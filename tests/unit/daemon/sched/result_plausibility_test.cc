// The plausibility of trainer figures (daemon/sched/result_plausibility.h): what a summary or a
// step may claim, the field named when it cannot be true, and conversions to int64 that are
// never undefined.
#include "daemon/sched/result_plausibility.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

namespace xv::sched {
namespace {

using nlohmann::json;

json XvTrainSummary() {
  return json::parse(
      R"({"type":"summary","t":9,"val_bpb":2.345,"training_seconds":20.1,"total_seconds":31.5,)"
      R"("peak_vram_mb":0.0,"mfu_percent":null,"total_tokens_M":0.5,"num_steps":61,)"
      R"("num_params_M":3.4,"depth":2,"tok_per_sec":24000.5,"peak_reserved_mb":0.0,)"
      R"("attention_backend":"math","peak_flops":null,"peak_flops_source":"unknown",)"
      R"("flops_per_token":20000000,"num_params":3400001,"total_tokens":499712})");
}

// The message of judging `summary` with `field` set to `value` (parsed as JSON).
std::string SummaryVerdict(const std::string& field, const std::string& value) {
  json j = XvTrainSummary();
  j[field] = json::parse(value);
  ResultFigures fig;
  const Status s = ReadResultFigures(j, &fig);
  return s.ok() ? "ok" : s.message();
}

TEST(DoubleToInt64, ConvertsOnlyWhatFits) {
  EXPECT_EQ(DoubleToInt64(61.0), 61);
  EXPECT_EQ(DoubleToInt64(-2.9), -2);
  EXPECT_EQ(DoubleToInt64(-9223372036854775808.0), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(DoubleToInt64(9223372036854774784.0), 9223372036854774784);  // largest below 2^63
  EXPECT_FALSE(DoubleToInt64(9223372036854775808.0));                    // 2^63
  EXPECT_FALSE(DoubleToInt64(1e300));
  EXPECT_FALSE(DoubleToInt64(-1e300));
  EXPECT_FALSE(DoubleToInt64(std::nan("")));
  EXPECT_FALSE(DoubleToInt64(std::numeric_limits<double>::infinity()));
  EXPECT_EQ(JsonInt64(json::parse("9223372036854775807")), std::numeric_limits<int64_t>::max());
  EXPECT_FALSE(JsonInt64(json::parse("9223372036854775808")));  // unsigned, over int64
  EXPECT_FALSE(JsonInt64(json::parse("18446744073709551615")));
  EXPECT_FALSE(JsonInt64(json::parse("1e300")));
  EXPECT_FALSE(JsonInt64(json("12")));
}

TEST(ReadResultFigures, AcceptsWhatXvTrainAndUpstreamReport) {
  ResultFigures fig;
  ASSERT_TRUE(ReadResultFigures(XvTrainSummary(), &fig).ok());
  EXPECT_DOUBLE_EQ(*fig.val_bpb, 2.345);
  EXPECT_EQ(*fig.num_steps, 61);
  EXPECT_EQ(*fig.total_tokens, 499712);  // the exact count wins over total_tokens_M
  EXPECT_EQ(*fig.num_params, 3400001);
  EXPECT_EQ(*fig.depth, 2);
  EXPECT_FALSE(fig.mfu_percent);  // null: unknown
  EXPECT_FALSE(fig.peak_flops);
  // Upstream's block: counts in millions only, num_steps as a float.
  const json upstream = json::parse(
      R"({"type":"summary","val_bpb":0.997900,"training_seconds":300.1,"total_seconds":325.9,)"
      R"("peak_vram_mb":45060.2,"mfu_percent":39.8,"total_tokens_M":499.6,"num_steps":953.0,)"
      R"("num_params_M":50.3,"depth":8})");
  ASSERT_TRUE(ReadResultFigures(upstream, &fig).ok());
  EXPECT_EQ(*fig.total_tokens, 499600000);
  EXPECT_EQ(*fig.num_params, 50300000);
  EXPECT_EQ(*fig.num_steps, 953);
  // A summary without val_bpb (a diverged run's) is not implausible by itself.
  ASSERT_TRUE(ReadResultFigures(json::parse(R"({"type":"summary","val_bpb":null})"), &fig).ok());
  EXPECT_FALSE(fig.val_bpb);
}

TEST(ReadResultFigures, RefusesWhatCannotBeTrueNamingTheField) {
  EXPECT_EQ(SummaryVerdict("val_bpb", "-3.5"),
            "val_bpb: a number (-3.5), not a positive finite number");
  EXPECT_EQ(SummaryVerdict("val_bpb", "0.0"),
            "val_bpb: a number (0.0), not a positive finite number");
  EXPECT_EQ(SummaryVerdict("val_bpb", "0"), "val_bpb: a number (0), not a positive finite number");
  // (1e400 cannot reach here: the JSON parser refuses it as a number overflow.)
  EXPECT_EQ(SummaryVerdict("val_bpb", "\"1.2\""),
            "val_bpb: a string of 3 bytes, not a positive finite number");
  EXPECT_EQ(SummaryVerdict("num_steps", "-1"),
            "num_steps: a number (-1), not a count (an integer >= 0 below 2^63)");
  EXPECT_EQ(SummaryVerdict("num_steps", "1e300").rfind("num_steps: a number (1e300)", 0), 0u);
  EXPECT_EQ(SummaryVerdict("total_tokens", "-5").rfind("total_tokens: ", 0), 0u);
  EXPECT_EQ(SummaryVerdict("num_params", "18446744073709551615").rfind("num_params: ", 0), 0u);
  EXPECT_EQ(SummaryVerdict("flops_per_token", "[1]"),
            "flops_per_token: an array of 1, not a count (an integer >= 0 below 2^63)");
  EXPECT_EQ(SummaryVerdict("depth", "4294967296"),
            "depth: a number (4294967296), not an integer in [0, 2^31)");
  EXPECT_EQ(SummaryVerdict("training_seconds", "-1").rfind("training_seconds: ", 0), 0u);
  EXPECT_EQ(SummaryVerdict("tok_per_sec", "-0.5").rfind("tok_per_sec: ", 0), 0u);
  EXPECT_EQ(SummaryVerdict("peak_vram_mb", "-1").rfind("peak_vram_mb: ", 0), 0u);
  EXPECT_EQ(SummaryVerdict("mfu_percent", "{}").rfind("mfu_percent: an object", 0), 0u);
  EXPECT_EQ(SummaryVerdict("mfu_percent", "-1"), "ok");  // negative: unknown, as the store keeps it
  // Counts in millions are checked where the exact count is absent: 1e300 x 1e6 is not cast.
  json j = json::parse(R"({"val_bpb":1.0,"total_tokens_M":1e300})");
  ResultFigures fig;
  Status s = ReadResultFigures(j, &fig);
  EXPECT_EQ(s.message().rfind("total_tokens_M: a number (1e300), not a count in millions", 0), 0u)
      << s.message();
  j = json::parse(R"({"val_bpb":1.0,"num_params_M":-0.5})");
  EXPECT_EQ(ReadResultFigures(j, &fig).message().rfind("num_params_M: ", 0), 0u);
}

TEST(ReadStepFigures, ProgressInZeroToOneAndStepsCounted) {
  StepFigures fig;
  ASSERT_TRUE(ReadStepFigures(json::parse(R"({"type":"step","step":12,"loss":3.4,"lrm":1.0,)"
                                          R"("dt_ms":312,"tok_per_sec":1.6e6,)"
                                          R"("mfu_percent":null,"progress":1.0,"epoch":1})"),
                              &fig)
                  .ok());
  EXPECT_EQ(fig.step, 12);
  EXPECT_DOUBLE_EQ(*fig.progress, 1.0);
  EXPECT_FALSE(fig.mfu_percent);
  ASSERT_TRUE(ReadStepFigures(json::parse(R"({"type":"step","loss":null})"), &fig).ok());
  EXPECT_EQ(fig.step, 0);
  EXPECT_FALSE(fig.loss);  // a non-finite loss arrives as null
  auto verdict = [](const std::string& text) {
    StepFigures f;
    const Status s = ReadStepFigures(json::parse(text), &f);
    return s.ok() ? std::string("ok") : s.message();
  };
  EXPECT_EQ(verdict(R"({"step":1,"progress":1e9})"),
            "progress: a number (1000000000.0), not a number in [0, 1]");
  EXPECT_EQ(verdict(R"({"step":1,"progress":-0.1})").rfind("progress: ", 0), 0u);
  EXPECT_EQ(verdict(R"({"step":1,"progress":1.0000001})").rfind("progress: ", 0), 0u);
  EXPECT_EQ(verdict(R"({"step":-1})").rfind("step: a number (-1)", 0), 0u);
  EXPECT_EQ(verdict(R"({"step":1e300})").rfind("step: ", 0), 0u);
  EXPECT_EQ(verdict(R"({"step":1,"dt_ms":-3})").rfind("dt_ms: ", 0), 0u);
  EXPECT_EQ(verdict(R"({"step":1,"loss":"nan"})").rfind("loss: a string", 0), 0u);
}

// The flat fast path (ReadPlausibleStepFigures) accepts exactly the steps ReadStepFigures finds
// plausible, with the same figures, and leaves every other one to ReadStepFigures.
TEST(ReadPlausibleStepFigures, AgreesWithReadStepFigures) {
  int plausible = 0;
  for (const std::string text : {
           R"({"type":"step","step":12,"loss":3.4,"lrm":1.0,"dt_ms":312,"tok_per_sec":1.6e6,)"
           R"("mfu_percent":null,"progress":1.0,"epoch":1})",
           R"({"type":"step"})",
           R"({"step":0,"loss":-2.5,"lrm":-1,"dt_ms":0,"tok_per_sec":0,"progress":0})",
           R"({"step":7.9,"mfu_percent":41.5})",  // a float count is truncated
           R"({"step":9223372036854775807})",
           R"({"step":1,"progress":1e9})",
           R"({"step":1,"progress":-0.1})",
           R"({"step":1,"progress":1.0000001})",
           R"({"step":-1})",
           R"({"step":-0.5})",  // truncates to 0: plausible
           R"({"step":1e300})",
           R"({"step":1,"dt_ms":-3})",
           R"({"step":1,"tok_per_sec":-0.001})",
           R"({"step":1,"loss":"nan"})",
           R"({"step":true})",
           R"({"step":1,"loss":false})",
           R"({"step":"12"})",
       }) {
    FlatJsonObject flat;
    ASSERT_TRUE(FlatJsonObject::Parse(text, &flat)) << text;
    StepFigures full, fast;
    const bool full_ok = ReadStepFigures(json::parse(text), &full).ok();
    const bool fast_ok = ReadPlausibleStepFigures(flat, &fast);
    ASSERT_EQ(fast_ok, full_ok) << text;
    if (!full_ok) continue;
    ++plausible;
    EXPECT_EQ(fast.step, full.step) << text;
    EXPECT_EQ(fast.loss, full.loss) << text;
    EXPECT_EQ(fast.lrm, full.lrm) << text;
    EXPECT_EQ(fast.dt_ms, full.dt_ms) << text;
    EXPECT_EQ(fast.tok_per_sec, full.tok_per_sec) << text;
    EXPECT_EQ(fast.mfu_percent, full.mfu_percent) << text;
    EXPECT_EQ(fast.progress, full.progress) << text;
  }
  EXPECT_EQ(plausible, 6);
}

}  // namespace
}  // namespace xv::sched
