#include "tests/hostile/hostile_fixture.h"

#include <cstdio>
#include <thread>

namespace xv::hostile {

namespace {

bool IsTerminal(const std::string& state) {
  return state != "queued" && state != "assigned" && state != "running" && !state.empty();
}

}  // namespace

void HostileFixture::SetUp() {
  ASSERT_TRUE(e2e::Sandbox::BinariesBuilt());
  base_recipe_ = e2e::ReadFileText(e2e::SourcePath("recipes/cpu-tiny.yaml"));
  ASSERT_FALSE(base_recipe_.empty()) << "recipes/cpu-tiny.yaml";
}

void HostileFixture::TearDown() {
  watched_.clear();
  xvd_.Stop();
}

void HostileFixture::StartDaemon(const std::vector<std::string>& extra) {
  xvd_args_ = extra;
  ASSERT_TRUE(sb_.StartDaemon(&xvd_, xvd_args_));
  Connect();
}

void HostileFixture::Connect() {
  channel_ = DaemonChannel(sb_.socket_path());
  experiments_ = xv::v1::Experiments::NewStub(channel_);
  campaigns_ = xv::v1::Campaigns::NewStub(channel_);
}

void HostileFixture::WatchProcess(const std::string& name, std::function<bool()> alive,
                                  std::function<void()> restart) {
  watched_.push_back({name, std::move(alive), std::move(restart)});
}

grpc::Status HostileFixture::ProbeStatus(xv::v1::StatusResponse* out) {
  grpc::ClientContext ctx;
  Deadline(&ctx, kProbeSeconds);
  xv::v1::StatusResponse resp;
  grpc::Status s = experiments_->Status(&ctx, xv::v1::StatusRequest(), &resp);
  if (out) *out = std::move(resp);
  return s;
}

std::vector<std::string> HostileFixture::DeadProcesses() {
  std::vector<std::string> dead;
  if (!xvd_.Alive()) dead.push_back("xvd");
  for (Watched& w : watched_) {
    if (!w.alive()) dead.push_back(w.name);
  }
  return dead;
}

void HostileFixture::Recover(bool restart_daemon) {
  if (restart_daemon || !xvd_.Alive()) {
    xvd_.Stop(2.0);
    EXPECT_TRUE(sb_.StartDaemon(&xvd_, xvd_args_)) << "restarting xvd after a crash or a hang";
    Connect();
  }
  for (Watched& w : watched_) w.restart();
}

std::string HostileFixture::Logs(const std::vector<std::string>& more) const {
  std::vector<std::string> names = logs_;
  names.insert(names.end(), more.begin(), more.end());
  return sb_.LogTails(names, 3000);
}

bool HostileFixture::WaitTerminal(int64_t id, double timeout_s, xv::v1::Experiment* out,
                                  std::string* error) {
  const auto end = std::chrono::steady_clock::now() +
                   std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  while (std::chrono::steady_clock::now() < end) {
    grpc::ClientContext ctx;
    Deadline(&ctx, 5.0);
    xv::v1::GetExperimentRequest req;
    req.set_id(id);
    xv::v1::Experiment e;
    grpc::Status s = experiments_->GetExperiment(&ctx, req, &e);
    if (!s.ok()) {
      *error = "GetExperiment " + std::to_string(id) + ": " + CodeName(s.error_code()) + " " +
               s.error_message().substr(0, 200);
      if (s.error_code() != grpc::StatusCode::UNAVAILABLE &&
          s.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) {
        return false;
      }
    } else {
      error->clear();
      *out = e;
      if (IsTerminal(e.state())) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (error->empty()) {
    *error = "experiment " + std::to_string(id) + " still " + out->state() + " after " +
             std::to_string(static_cast<int>(timeout_s)) + " s";
  }
  return false;
}

RowOutcome HostileFixture::RunRow(const std::string& row,
                                  const std::function<void(RowFindings*)>& action,
                                  StoreCheck check) {
  const std::string name = group_ + ": " + row;
  const DatabaseSnapshot before = DatabaseSnapshot::Take(sb_.database_path());
  RowFindings f;
  action(&f);
  std::vector<std::string> dead = DeadProcesses();
  bool probe_hung = false;
  if (dead.empty()) {
    grpc::Status s = ProbeStatus();
    if (s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
      probe_hung = true;
      f.Hang("Status after the row: no answer within " +
             std::to_string(static_cast<int>(kProbeSeconds)) + " s");
    } else if (!s.ok()) {
      f.Wrong("Status after the row: " + CodeName(s.error_code()) + " " +
              s.error_message().substr(0, 200));
    }
    dead = DeadProcesses();
  }
  const DatabaseSnapshot after = DatabaseSnapshot::Take(sb_.database_path());
  if (!after.error.empty()) {
    f.Wrong("database: " + after.error);
  } else if (after.integrity != "ok") {
    f.Wrong("integrity_check: " + after.integrity.substr(0, 300));
  }
  if (check == StoreCheck::kUnchanged && before.error.empty() && after.error.empty()) {
    const std::string diff = DatabaseSnapshot::Differences(before, after);
    if (!diff.empty()) f.Wrong("stored: " + diff);
  }

  RowOutcome outcome = RowOutcome::kRefused;
  std::string detail;
  if (!dead.empty()) {
    outcome = RowOutcome::kCrash;
    for (const std::string& d : dead) detail += (detail.empty() ? "" : ", ") + d;
    detail += " died";
  } else if (!f.hang.empty()) {
    outcome = RowOutcome::kHang;
    detail = f.hang;
  } else if (!f.wrong.empty()) {
    outcome = RowOutcome::kAccepted;
  }
  for (const std::string& w : f.wrong) detail += (detail.empty() ? "" : "; ") + w;
  ledger_->Record(name, outcome, detail);
  std::printf("[hostile] %-8s %s%s%s\n", RowOutcomeName(outcome), name.c_str(),
              detail.empty() ? "" : " -- ", detail.c_str());
  std::fflush(stdout);
  if (outcome != RowOutcome::kRefused && fail_unless_refused_) {
    ADD_FAILURE() << name << ": " << RowOutcomeName(outcome) << ": " << detail << Logs();
  }
  if (outcome == RowOutcome::kCrash || outcome == RowOutcome::kHang) {
    Recover(/*restart_daemon=*/probe_hung);
  }
  return outcome;
}

}  // namespace xv::hostile
