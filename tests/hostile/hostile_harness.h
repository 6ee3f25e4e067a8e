// The hostile-input suite's harness (issue 11, tests/hostile/): how one row is judged, the ledger
// of every row's outcome, and the clients that speak the real protocols with a deadline on every
// wait, so that a hang is detected instead of waited on:
//  - RowFindings: what one row saw that falls short of the refusal the issue asks for (a wrong
//    status code, a message that does not start with the field, something stored), or the
//    deadline that passed.
//  - HostileLedger: every row's outcome (refused / accepted / crash / hang) and the summary line
//    `hostile inputs: N tried, N refused, N accepted, N crashes, N hangs`.
//  - DaemonChannel, Deadline: gRPC over the daemon's unix socket.
//  - DatabaseSnapshot: row counts of every table of the daemon's SQLite file, and its
//    `PRAGMA integrity_check`.
//  - WorkerSessionClient: a worker as the daemon sees it (one xv.v1.Workers Session stream), whose
//    reads wait at most a given time.
//  - McpChild: `xvctl mcp` on pipes, one JSON-RPC message per line, reads with a deadline.
// Thread-safety: HostileLedger is safe from any thread; WorkerSessionClient's Send may be called
// from several threads; the rest is for one test thread.
#pragma once

#include <grpcpp/grpcpp.h>
#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "xv/v1/workers.grpc.pb.h"

namespace xv::hostile {

// How a row ended. kRefused: handled as the issue asks (refused with the right code naming the
// field and nothing stored; for the load rows, served within their bounds). kAccepted: anything
// else short of a crash or a hang (stored, refused with the wrong code or without naming the
// field, a poisoned listing). kCrash: a watched process (xvd, xv-worker, xvctl mcp) died.
// kHang: a deadline passed (an RPC, a Status probe, an experiment that never ended, an MCP reply).
enum class RowOutcome { kRefused, kAccepted, kCrash, kHang };

const char* RowOutcomeName(RowOutcome outcome);

// The findings of one row, filled by its action and by the checks after it.
struct RowFindings {
  std::vector<std::string> wrong;  // each way the row was not refused as asked
  std::string hang;                // which deadline passed ("" when none did)

  void Wrong(const std::string& why) { wrong.push_back(why); }
  void Hang(const std::string& what) {
    if (hang.empty()) hang = what;
  }
  // A refusal as the issue asks: `status` has code `want` and its message starts with
  // `field_prefix` (a proto field path, e.g. "candidates[0].name"; alternatives separated by '|');
  // DEADLINE_EXCEEDED is a hang.
  // `what` names the call in findings.
  void ExpectRefusal(const std::string& what, const grpc::Status& status, grpc::StatusCode want,
                     const std::string& field_prefix);
  // A gRPC status that is not OK: DEADLINE_EXCEEDED is a hang, any other code is wrong.
  void ExpectOk(const std::string& what, const grpc::Status& status);
};

// "INVALID_ARGUMENT" etc.
std::string CodeName(grpc::StatusCode code);

// Every row's outcome, across all the tests of the binary.
class HostileLedger {
 public:
  static HostileLedger& Global();

  void Record(const std::string& row, RowOutcome outcome, const std::string& detail);
  int tried() const;
  int count(RowOutcome outcome) const;
  // `hostile inputs: N tried, N refused, N accepted, N crashes, N hangs`
  std::string SummaryLine() const;
  // One line per row that was not refused: "row: outcome: detail".
  std::vector<std::string> NotRefused() const;

 private:
  struct Entry {
    std::string row;
    RowOutcome outcome;
    std::string detail;
  };
  mutable std::mutex mu_;
  std::vector<Entry> entries_;  // guarded by mu_
};

// A channel to the daemon's unix socket: large messages allowed in (a reply over 4 MiB is the
// daemon's problem to avoid, not the client's to refuse), quick reconnects.
std::shared_ptr<grpc::Channel> DaemonChannel(const std::string& socket_path);

// Sets `ctx`'s deadline `seconds` from now.
void Deadline(grpc::ClientContext* ctx, double seconds);

// The daemon's SQLite file read with the sqlite3 API (read-only, beside the running daemon).
struct DatabaseSnapshot {
  std::map<std::string, int64_t> rows;  // table -> row count
  std::string integrity;                // `PRAGMA integrity_check`: "ok" when sound
  std::string error;                    // why it could not be read ("" when it could)

  static DatabaseSnapshot Take(const std::string& database_path);
  // "experiments 3 -> 67, rounds 1 -> 2" for every table whose count differs; "" when none does.
  // The audit table is left out: it records refused calls too.
  static std::string Differences(const DatabaseSnapshot& before, const DatabaseSnapshot& after);
};

// The bytes of `text` that a terminal would act on: C0 controls other than LF and TAB, DEL, and
// the C1 controls as UTF-8 (U+0080..U+009F). Empty when there are none; else a short description
// ("ESC at byte 12, BEL at byte 40").
std::string RawControlCharacters(const std::string& text);

// A worker's Session stream driven by the test. A reader thread queues every DaemonMessage; waits
// take a timeout. The stream's own deadline is `stream_deadline_s`.
class WorkerSessionClient {
 public:
  WorkerSessionClient(const std::shared_ptr<grpc::Channel>& channel, double stream_deadline_s);
  ~WorkerSessionClient();
  WorkerSessionClient(const WorkerSessionClient&) = delete;
  WorkerSessionClient& operator=(const WorkerSessionClient&) = delete;

  // Writes one message; false when the stream is already broken.
  bool Send(const xv::v1::WorkerMessage& message);
  // Sends a Register and waits for Registered (false: the stream ended first or the wait passed
  // `timeout_s`; ended() then says which).
  bool Register(const xv::v1::Register& reg, double timeout_s);
  // Waits for the next message satisfying `pred` (earlier ones are consumed); false when the
  // stream ends or `timeout_s` passes.
  bool WaitFor(const std::function<bool(const xv::v1::DaemonMessage&)>& pred, double timeout_s,
               xv::v1::DaemonMessage* out);
  // The stream ended (the daemon closed it or it broke).
  bool ended();
  // Waits up to `timeout_s` for the stream to end and returns its status (DEADLINE_EXCEEDED made
  // up here when it did not end in time).
  grpc::Status WaitForEnd(double timeout_s);
  // Half-closes, waits up to `timeout_s` for the daemon to end the stream, cancels it otherwise.
  grpc::Status Close(double timeout_s);

  // A Register of a CPU worker named `name` offering `trainers`, `max_concurrent` at once.
  static xv::v1::Register MakeRegister(const std::string& name,
                                       const std::vector<std::string>& trainers,
                                       int max_concurrent = 1);

 private:
  void ReadLoop();

  std::unique_ptr<xv::v1::Workers::Stub> stub_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<xv::v1::WorkerMessage, xv::v1::DaemonMessage>> stream_;
  std::mutex write_mu_;       // one writer at a time; Finish is called under it too
  bool writes_done_ = false;  // guarded by write_mu_
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<xv::v1::DaemonMessage> inbox_;  // guarded by mu_
  bool ended_ = false;                       // guarded by mu_
  grpc::Status end_status_;                  // guarded by mu_
  std::thread reader_;
};

// `argv` (xvctl mcp) as a child with stdin and stdout on pipes and stderr appended to `log_path`,
// in its own process group with `env` added and its address space limited to
// `address_space_bytes` (a server that reads /dev/zero without limit must die of it, not take the
// machine's memory). The destructor closes stdin and kills what is left.
class McpChild {
 public:
  McpChild(const std::vector<std::string>& argv,
           const std::vector<std::pair<std::string, std::string>>& env, const std::string& log_path,
           size_t address_space_bytes = size_t{4} << 30);
  ~McpChild();
  McpChild(const McpChild&) = delete;
  McpChild& operator=(const McpChild&) = delete;

  bool started() const { return pid_ > 0 && to_child_ >= 0; }
  pid_t pid() const { return pid_; }
  // Still running (not reaped)?
  bool Alive();
  // Writes one line (a '\n' is appended); false when the child no longer reads.
  bool SendLine(const std::string& line);
  // Sends `request` and waits up to `timeout_s` for the response with its id (or an error with a
  // null id); other messages (notifications) are skipped. False on EOF or timeout (*hung says
  // which: true for the timeout). `raw` receives the response line as printed.
  bool Request(const nlohmann::json& request, double timeout_s, nlohmann::json* response,
               std::string* raw, bool* hung);
  // Waits up to `timeout_s` for the response with id `id` (or an error with a null id), skipping
  // other messages; as Request without sending.
  bool WaitReply(const nlohmann::json& id, double timeout_s, nlohmann::json* response,
                 std::string* raw, bool* hung);
  // Kills the child (its group) and reaps it.
  void Kill();

 private:
  bool ReadLine(std::string* line, double timeout_s, bool* hung);

  pid_t pid_ = -1;
  bool reaped_ = false;
  int to_child_ = -1;
  int from_child_ = -1;
  std::string buffer_;
};

// Text made of `depth` '[' then `depth` ']' (JSON nested `depth` deep).
std::string NestedJsonArray(size_t depth);

}  // namespace xv::hostile
