#include "client/views/experiment_view.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

#include "client/views/text_table.h"

namespace xv::client {
namespace {

v1::Experiment Succeeded() {
  v1::Experiment e;
  e.set_id(3);
  e.set_name("matrix_lr=0.02");
  e.set_state("succeeded");
  e.set_device_name("cpu: test");
  e.set_worker("w0");
  e.set_started_at("2026-12-01T20:04:32.125Z");
  e.set_finished_at("2026-12-01T20:05:00.500Z");
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
  EXPECT_EQ(j["worker"], "w0");
  EXPECT_EQ(j["started_at"], "2026-12-01T20:04:32.125Z");
  EXPECT_EQ(j["finished_at"], "2026-12-01T20:05:00.500Z");
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
  EXPECT_EQ(t,
            "id  name            state            val_bpb  mem GB      tok/s  MFU  steps  seconds  "
            "device     worker  started   finished  decision  reason\n"
            "--  --------------  --------------  --------  ------  ---------  ---  -----  -------  "
            "---------  ------  --------  --------  --------  -------------------\n"
            " 3  matrix_lr=0.02  succeeded       1.234568       -  1,234,567    ?  1,500     27.3  "
            "cpu: test  w0      20:04:32  20:05:00  keep      numbers\n"
            "14  matrix_lr=0.07  failed/crashed         -       -          -    -      -        -  "
            "-          -       -         -         -         kept matrix_lr=0.02\n");
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

TEST(RenderResultsTable, FitsEightyColumnsKeepingIdNameStateValBpbMemoryDecisionAndReason) {
  std::vector<v1::Experiment> rows;
  for (int i = 0; i < 5; ++i) {
    v1::Experiment e = Succeeded();
    e.set_id(100 + i);
    e.set_name("matrix_lr=0.0" + std::to_string(i) + ",embedding_lr=0.6,unembedding_lr=0.004");
    e.set_device_name("NVIDIA H200 (hostname-with-a-long-name, GPU 3)");
    e.set_decision_reason("p=0.0123 < 0.05 and gain 0.0041 > min effect 0.002 over 4 replicates");
    e.mutable_result()->set_peak_vram_mb(45260.8);
    rows.push_back(e);
  }
  v1::Experiment failed;
  failed.set_id(99);
  failed.set_name("n_embd=1536");
  failed.set_state("failed");
  failed.set_failure_kind("oom");
  rows.push_back(failed);
  const std::string wide = RenderResultsTable(rows, 0);
  const std::string fitted = RenderResultsTable(rows, 80);
  size_t widest_wide = 0;
  std::istringstream wide_lines(wide);
  for (std::string line; std::getline(wide_lines, line);) {
    widest_wide = std::max(widest_wide, DisplayWidth(line));
  }
  EXPECT_GT(widest_wide, 200u) << wide;
  std::istringstream lines(fitted);
  std::string header;
  std::getline(lines, header);
  for (const char* kept : {"id", "name", "state", "val_bpb", "mem GB", "decision", "reason"}) {
    EXPECT_NE(header.find(kept), std::string::npos) << kept << "\n" << fitted;
  }
  EXPECT_EQ(header.find("device"), std::string::npos) << fitted;
  EXPECT_EQ(header.find("steps"), std::string::npos) << fitted;
  EXPECT_LE(DisplayWidth(header), 80u) << fitted;
  for (std::string line; std::getline(lines, line);) {
    EXPECT_LE(DisplayWidth(line), 80u) << line;
  }
  EXPECT_NE(fitted.find("1.234568    44.2"), std::string::npos) << fitted;
  EXPECT_NE(fitted.find("failed/oom"), std::string::npos) << fitted;
}

}  // namespace
}  // namespace xv::client
