// HostileFixture: the scaffolding every group of the hostile-input suite shares. It owns a real
// xvd in an e2e Sandbox (and whatever other processes a group adds to the watch list), a gRPC
// channel to it, and RunRow, which runs one row and judges it:
//   1. snapshot the database (row counts of every table);
//   2. run the row's action, which fills RowFindings (wrong code, field not named, a deadline);
//   3. crash: a watched process died (checked after the action and again after the probe);
//   4. Status must answer within kProbeSeconds (else: hang);
//   5. `PRAGMA integrity_check` must read ok; with StoreCheck::kUnchanged every table keeps its
//      row count (a refused request stores nothing);
//   6. the outcome (crash > hang > accepted > refused) goes to the ledger and the log, a failure is
//      a test failure naming the row with the processes' log tails; after a crash or a hang the
//      group's processes are restarted so later rows are judged on their own.
// Thread-safety: one test thread (actions may start their own threads and join them).
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tests/e2e/process_harness.h"
#include "tests/hostile/hostile_harness.h"
#include "xv/v1/experiments.grpc.pb.h"

namespace xv::hostile {

// Seconds a Status probe may take after a row before the row counts as a hang.
inline constexpr double kProbeSeconds = 10.0;
// Seconds a hostile RPC may take before it counts as a hang.
inline constexpr double kCallSeconds = 20.0;

enum class StoreCheck {
  kUnchanged,   // a refused request: every table keeps its row count
  kConsistent,  // rows may be added (a worker's refused result is still an attempt); integrity only
};

class HostileFixture : public ::testing::Test {
 protected:
  HostileFixture() : sb_("hi") {}
  void SetUp() override;
  void TearDown() override;

  // Starts xvd with `extra` arguments (kept for restarts) and connects.
  void StartDaemon(const std::vector<std::string>& extra);
  // Adds a process to watch: `alive` says whether it still runs; `restart` brings it back (or a
  // fresh one) after a crash or a hang.
  void WatchProcess(const std::string& name, std::function<bool()> alive,
                    std::function<void()> restart);
  // Runs one row (see the file comment) and returns its outcome; group_ prefixes the row's name
  // in the ledger.
  RowOutcome RunRow(const std::string& row, const std::function<void(RowFindings*)>& action,
                    StoreCheck check = StoreCheck::kUnchanged);

  // Status with the probe deadline.
  grpc::Status ProbeStatus(xv::v1::StatusResponse* out = nullptr);
  // The daemon's stubs on the current channel (renewed after a restart).
  xv::v1::Experiments::Stub* experiments() { return experiments_.get(); }
  xv::v1::Campaigns::Stub* campaigns() { return campaigns_.get(); }
  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }

  // recipes/cpu-tiny.yaml's text.
  const std::string& base_recipe() const { return base_recipe_; }
  // The last ~3000 bytes of each log named (xvd.log always first).
  std::string Logs(const std::vector<std::string>& more = {}) const;
  // Polls GetExperiment until its state is terminal or `timeout_s` passes; false on timeout (or an
  // RPC error, in *error).
  bool WaitTerminal(int64_t id, double timeout_s, xv::v1::Experiment* out, std::string* error);

  std::string group_;  // set by each test: "client", "worker", ...
  // Where RunRow records outcomes, and whether an outcome other than refused fails the test (the
  // harness self-check judges on purpose-made crashes and hangs into a ledger of its own).
  HostileLedger* ledger_ = &HostileLedger::Global();
  bool fail_unless_refused_ = true;
  std::vector<std::string> logs_ = {"xvd.log"};
  e2e::Sandbox sb_;
  e2e::ChildGuard xvd_;

 private:
  struct Watched {
    std::string name;
    std::function<bool()> alive;
    std::function<void()> restart;
  };
  void Connect();
  std::vector<std::string> DeadProcesses();
  void Recover(bool restart_daemon);

  std::vector<std::string> xvd_args_;
  std::vector<Watched> watched_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<xv::v1::Experiments::Stub> experiments_;
  std::unique_ptr<xv::v1::Campaigns::Stub> campaigns_;
  std::string base_recipe_;
};

}  // namespace xv::hostile
