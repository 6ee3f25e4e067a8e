#include "client/views/experiment_view.h"

#include <gtest/gtest.h>

namespace xv::client {
namespace {

v1::Experiment Succeeded() {
  v1::Experiment e;
  e.set_id(3);
  e.set_name("matrix_lr=0.02");
  e.set_state("succeeded");
  e.set_device_name("cpu: test");
  e.set_decision("keep");
  e.set_overrides_json("{\"matrix_lr\": 0.02}");
  auto* r = e.mutable_result();
  r->set_val_bpb(1.23456789);
  r->set_tok_per_sec(1234567.4);
  r->set_mfu_percent(-1);
  r->set_num_steps(1500);
  r->set_total_seconds(27.34);
  return e;
}

TEST(ExperimentJson, ResultFiguresAndUnknownMfuIsNull) {
  auto j = ExperimentJson(Succeeded());
  EXPECT_EQ(j["id"], 3);
  EXPECT_EQ(j["state"], "succeeded");
  EXPECT_DOUBLE_EQ(j["val_bpb"].get<double>(), 1.23456789);
  EXPECT_TRUE(j["mfu_percent"].is_null());
  EXPECT_EQ(j["num_steps"], 1500);
  EXPECT_DOUBLE_EQ(j["overrides"]["matrix_lr"].get<double>(), 0.02);
}

TEST(ExperimentJson, NoResultGivesNulls) {
  v1::Experiment e;
  e.set_id(4);
  e.set_state("failed");
  e.set_failure_kind("crashed");
  auto j = ExperimentJson(e);
  EXPECT_TRUE(j["val_bpb"].is_null());
  EXPECT_TRUE(j["tok_per_sec"].is_null());
  EXPECT_EQ(j["failure_kind"], "crashed");
}

TEST(RenderResultsTable, FormatsNumbersAndShowsFailureKindsAndReasons) {
  v1::Experiment ok = Succeeded();
  ok.set_decision_reason("numbers");
  v1::Experiment failed;
  failed.set_id(14);
  failed.set_name("matrix_lr=0.07");
  failed.set_state("failed");
  failed.set_failure_kind("crashed");
  failed.set_round_decision("kept matrix_lr=0.02");
  std::string t = RenderResultsTable({ok, failed});
  EXPECT_EQ(
      t,
      "id  name            state            val_bpb      tok/s  MFU  steps  seconds  device     "
      "decision  reason\n"
      "--  --------------  --------------  --------  ---------  ---  -----  -------  ---------  "
      "--------  -------------------\n"
      " 3  matrix_lr=0.02  succeeded       1.234568  1,234,567    ?  1,500     27.3  cpu: test  "
      "keep      numbers\n"
      "14  matrix_lr=0.07  failed/crashed         -          -    -      -        -  -          "
      "-         kept matrix_lr=0.02\n");
}

TEST(RenderResultsTable, AReusedResultNamesTheRunItCopies) {
  v1::Experiment reused = Succeeded();
  reused.set_id(7);
  reused.set_reused_from_id(3);
  reused.set_decision("");
  std::string t = RenderResultsTable({Succeeded(), reused});
  EXPECT_NE(t.find(" 7  matrix_lr=0.02  succeeded  1.234568"), std::string::npos) << t;
  EXPECT_NE(t.find("result of #3 (not rerun)\n"), std::string::npos) << t;
  reused.set_decision_reason("numbers");
  EXPECT_NE(RenderResultsTable({reused}).find("result of #3 (not rerun); numbers"),
            std::string::npos);
  EXPECT_EQ(RenderResultsTable({Succeeded()}).find("not rerun"), std::string::npos);
}

TEST(IsTerminalState, AllTerminalStates) {
  for (const char* s :
       {"succeeded", "diverged", "failed", "invalid", "cancelled", "timed_out", "lost"}) {
    EXPECT_TRUE(IsTerminalState(s)) << s;
  }
  for (const char* s : {"queued", "assigned", "running", ""}) EXPECT_FALSE(IsTerminalState(s)) << s;
}

}  // namespace
}  // namespace xv::client
