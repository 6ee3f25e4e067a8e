// `xvctl compare`: groups, statistics, the MFU denominator, and the refusal to mix metric versions
// or time budgets.
#include "client/views/compare_view.h"

#include <gtest/gtest.h>

namespace xv::client {
namespace {

v1::Experiment RunOf(int64_t id, const std::string& name, const std::string& device, double val_bpb,
                     const std::string& metric_version = "xv-1") {
  v1::Experiment e;
  e.set_id(id);
  e.set_name(name);
  e.set_state("succeeded");
  e.set_device_name(device);
  e.set_trainer("libtorch");
  v1::Result* r = e.mutable_result();
  r->set_val_bpb(val_bpb);
  r->set_tok_per_sec(1000);
  r->set_mfu_percent(40);
  r->set_peak_flops(989e12);
  r->set_peak_flops_source("datasheet");
  r->set_peak_vram_mb(2048);
  r->set_total_tokens(1000000);
  r->set_metric_version(metric_version);
  return e;
}

double NoBudget(const v1::Experiment&) { return 0; }

TEST(Compare, GroupsByCandidateAndDeviceWithMeanSdAndDenominator) {
  v1::Experiment failed = RunOf(5, "a", "H200", 0);
  failed.set_state("diverged");
  failed.clear_result();
  auto groups = BuildComparison({RunOf(1, "a", "H200", 1.0), RunOf(2, "a", "H200", 1.2),
                                 RunOf(3, "a", "MI300X", 1.1), failed});
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].device, "H200");
  EXPECT_EQ(groups[0].n, 2);
  EXPECT_EQ(groups[0].failed, 1);
  EXPECT_EQ(groups[0].runs, 3);
  EXPECT_DOUBLE_EQ(groups[0].val_bpb_mean, 1.1);
  EXPECT_NEAR(groups[0].val_bpb_sd, 0.141421356, 1e-8);
  EXPECT_EQ(groups[0].mfu_denominator, "989 TFLOP/s datasheet");
  EXPECT_DOUBLE_EQ(groups[0].peak_memory_gb, 2.0);
  EXPECT_EQ(groups[1].n, 1);
  const std::string table = RenderComparison(groups, 0);
  EXPECT_NE(table.find("1.100000  0.141421"), std::string::npos) << table;
  EXPECT_TRUE(ComparisonJson(groups)["groups"][1]["val_bpb_sd"].is_null());
}

TEST(Compare, RefusesToMixMetricVersionsNamingThemAndTheirRuns) {
  Status st =
      CheckComparable({RunOf(1, "a", "H200", 1.0, "xv-1"), RunOf(2, "a", "H200", 1.0, "xv-2"),
                       RunOf(3, "a", "H200", 1.0, "xv-1")},
                      NoBudget);
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(st.message().find("mix metric versions: xv-1 (#1, #3); xv-2 (#2)"), std::string::npos)
      << st.message();
  EXPECT_TRUE(
      CheckComparable({RunOf(1, "a", "H200", 1.0), RunOf(2, "b", "H200", 1.0)}, NoBudget).ok());
}

TEST(Compare, RefusesToMixTimeBudgets) {
  auto budget = [](const v1::Experiment& e) { return e.id() == 2 ? 600.0 : 300.0; };
  Status st = CheckComparable({RunOf(1, "a", "H200", 1.0), RunOf(2, "a", "H200", 1.0)}, budget);
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(st.message().find("mix time budgets: 300 s (#1); 600 s (#2)"), std::string::npos)
      << st.message();
}

}  // namespace
}  // namespace xv::client
