#include "tests/hostile/hostile_harness.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace xv::hostile {

using nlohmann::json;

const char* RowOutcomeName(RowOutcome outcome) {
  switch (outcome) {
    case RowOutcome::kRefused:
      return "refused";
    case RowOutcome::kAccepted:
      return "ACCEPTED";
    case RowOutcome::kCrash:
      return "CRASH";
    case RowOutcome::kHang:
      return "HANG";
  }
  return "?";
}

std::string CodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return "OK";
    case grpc::StatusCode::CANCELLED:
      return "CANCELLED";
    case grpc::StatusCode::UNKNOWN:
      return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND:
      return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS:
      return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED:
      return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION:
      return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED:
      return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE:
      return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED:
      return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL:
      return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE:
      return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS:
      return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED:
      return "UNAUTHENTICATED";
    default:
      return "code " + std::to_string(static_cast<int>(code));
  }
}

namespace {

// At most ~200 bytes of a message, for findings (a daemon that echoes a 1 MiB input must not
// make the test's own output unreadable).
std::string Excerpt(const std::string& s) {
  if (s.size() <= 200) return s;
  return s.substr(0, 200) + "... (" + std::to_string(s.size()) + " bytes)";
}

}  // namespace

void RowFindings::ExpectRefusal(const std::string& what, const grpc::Status& status,
                                grpc::StatusCode want, const std::string& field_prefix) {
  if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    Hang(what + ": no answer before its deadline");
    return;
  }
  if (status.ok()) {
    Wrong(what + ": answered OK, want " + CodeName(want) + " naming " + field_prefix);
    return;
  }
  if (status.error_code() != want) {
    Wrong(what + ": " + CodeName(status.error_code()) + " '" + Excerpt(status.error_message()) +
          "', want " + CodeName(want));
  }
  bool named = false;
  for (size_t start = 0; start <= field_prefix.size();) {
    size_t bar = field_prefix.find('|', start);
    if (bar == std::string::npos) bar = field_prefix.size();
    named |= status.error_message().rfind(field_prefix.substr(start, bar - start), 0) == 0;
    start = bar + 1;
  }
  if (!named) {
    Wrong(what + ": the message does not start with '" + field_prefix + "': '" +
          Excerpt(status.error_message()) + "'");
  }
  if (status.error_message().size() > 4096) {
    Wrong(what + ": the message is " + std::to_string(status.error_message().size()) +
          " bytes (it quotes the input whole)");
  }
}

void RowFindings::ExpectOk(const std::string& what, const grpc::Status& status) {
  if (status.ok()) return;
  if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    Hang(what + ": no answer before its deadline");
  } else {
    Wrong(what + ": " + CodeName(status.error_code()) + " '" + Excerpt(status.error_message()) +
          "'");
  }
}

HostileLedger& HostileLedger::Global() {
  static HostileLedger* ledger = new HostileLedger();
  return *ledger;
}

void HostileLedger::Record(const std::string& row, RowOutcome outcome, const std::string& detail) {
  std::lock_guard<std::mutex> lock(mu_);
  entries_.push_back({row, outcome, detail});
}

int HostileLedger::tried() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(entries_.size());
}

int HostileLedger::count(RowOutcome outcome) const {
  std::lock_guard<std::mutex> lock(mu_);
  int n = 0;
  for (const Entry& e : entries_) n += e.outcome == outcome;
  return n;
}

std::string HostileLedger::SummaryLine() const {
  return "hostile inputs: " + std::to_string(tried()) + " tried, " +
         std::to_string(count(RowOutcome::kRefused)) + " refused, " +
         std::to_string(count(RowOutcome::kAccepted)) + " accepted, " +
         std::to_string(count(RowOutcome::kCrash)) + " crashes, " +
         std::to_string(count(RowOutcome::kHang)) + " hangs";
}

std::vector<std::string> HostileLedger::NotRefused() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> lines;
  for (const Entry& e : entries_) {
    if (e.outcome == RowOutcome::kRefused) continue;
    lines.push_back(e.row + ": " + RowOutcomeName(e.outcome) + ": " + e.detail);
  }
  return lines;
}

std::shared_ptr<grpc::Channel> DaemonChannel(const std::string& socket_path) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(256 * 1024 * 1024);
  args.SetMaxSendMessageSize(256 * 1024 * 1024);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 500);
  // A separate connection per channel: the load rows' many streams must not share one.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel("unix:" + socket_path, grpc::InsecureChannelCredentials(), args);
}

void Deadline(grpc::ClientContext* ctx, double seconds) {
  ctx->set_deadline(std::chrono::system_clock::now() +
                    std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)));
}

DatabaseSnapshot DatabaseSnapshot::Take(const std::string& database_path) {
  DatabaseSnapshot snap;
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(database_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    snap.error = database_path + ": " + (db ? sqlite3_errmsg(db) : "out of memory");
    sqlite3_close(db);
    return snap;
  }
  sqlite3_busy_timeout(db, 10000);
  auto query = [&](const std::string& sql, std::vector<std::string>* column) -> bool {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) != SQLITE_OK) {
      snap.error = sql + ": " + sqlite3_errmsg(db);
      return false;
    }
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
      const unsigned char* t = sqlite3_column_text(st, 0);
      column->push_back(t ? reinterpret_cast<const char*>(t) : "");
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) snap.error = sql + ": " + sqlite3_errmsg(db);
    return rc == SQLITE_DONE;
  };
  std::vector<std::string> tables;
  if (query("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
            "ORDER BY name",
            &tables)) {
    for (const std::string& t : tables) {
      std::vector<std::string> n;
      if (!query("SELECT COUNT(*) FROM \"" + t + "\"", &n) || n.empty()) break;
      snap.rows[t] = std::stoll(n[0]);
    }
  }
  std::vector<std::string> integrity;
  if (query("PRAGMA integrity_check", &integrity)) {
    for (const std::string& line : integrity) {
      snap.integrity += (snap.integrity.empty() ? "" : "; ") + line;
    }
  }
  sqlite3_close(db);
  return snap;
}

std::string DatabaseSnapshot::Differences(const DatabaseSnapshot& before,
                                          const DatabaseSnapshot& after) {
  std::string diff;
  for (const auto& [table, n] : after.rows) {
    // The audit table records every state-changing call and every refusal by design (issue 15;
    // daemon/api/audit_interceptor.h): a refused hostile request adds its row there.
    if (table == "audit") continue;
    auto it = before.rows.find(table);
    const int64_t was = it == before.rows.end() ? 0 : it->second;
    if (was == n) continue;
    diff +=
        (diff.empty() ? "" : ", ") + table + " " + std::to_string(was) + " -> " + std::to_string(n);
  }
  return diff;
}

std::string RawControlCharacters(const std::string& text) {
  static const char* const kNames[32] = {"NUL", "SOH", "STX", "ETX", "EOT", "ENQ", "ACK", "BEL",
                                         "BS",  "TAB", "LF",  "VT",  "FF",  "CR",  "SO",  "SI",
                                         "DLE", "DC1", "DC2", "DC3", "DC4", "NAK", "SYN", "ETB",
                                         "CAN", "EM",  "SUB", "ESC", "FS",  "GS",  "RS",  "US"};
  std::string found;
  int shown = 0;
  auto add = [&](const std::string& name, size_t at) {
    if (shown++ < 4) {
      found += (found.empty() ? "" : ", ") + name + " at byte " + std::to_string(at);
    }
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 && c != '\n' && c != '\t') {
      add(kNames[c], i);
    } else if (c == 0x7f) {
      add("DEL", i);
    } else if (c == 0xc2 && i + 1 < text.size() &&
               static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(text[i + 1]) <= 0x9f) {
      add("C1 control", i);
    }
  }
  if (shown > 4) found += " and " + std::to_string(shown - 4) + " more";
  return found;
}

WorkerSessionClient::WorkerSessionClient(const std::shared_ptr<grpc::Channel>& channel,
                                         double stream_deadline_s)
    : stub_(xv::v1::Workers::NewStub(channel)) {
  Deadline(&ctx_, stream_deadline_s);
  stream_ = stub_->Session(&ctx_);
  reader_ = std::thread([this] { ReadLoop(); });
}

WorkerSessionClient::~WorkerSessionClient() {
  ctx_.TryCancel();
  if (reader_.joinable()) reader_.join();
}

void WorkerSessionClient::ReadLoop() {
  xv::v1::DaemonMessage m;
  while (stream_->Read(&m)) {
    std::lock_guard<std::mutex> lock(mu_);
    inbox_.push_back(m);
    cv_.notify_all();
  }
  grpc::Status status;
  {
    std::lock_guard<std::mutex> lock(write_mu_);
    writes_done_ = true;
    status = stream_->Finish();
  }
  std::lock_guard<std::mutex> lock(mu_);
  ended_ = true;
  end_status_ = status;
  cv_.notify_all();
}

bool WorkerSessionClient::Send(const xv::v1::WorkerMessage& message) {
  std::lock_guard<std::mutex> lock(write_mu_);
  if (writes_done_) return false;
  return stream_->Write(message);
}

bool WorkerSessionClient::Register(const xv::v1::Register& reg, double timeout_s) {
  xv::v1::WorkerMessage m;
  *m.mutable_register_() = reg;
  if (!Send(m)) return false;
  xv::v1::DaemonMessage reply;
  return WaitFor([](const xv::v1::DaemonMessage& d) { return d.has_registered(); }, timeout_s,
                 &reply);
}

bool WorkerSessionClient::WaitFor(const std::function<bool(const xv::v1::DaemonMessage&)>& pred,
                                  double timeout_s, xv::v1::DaemonMessage* out) {
  const auto end = std::chrono::steady_clock::now() +
                   std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    while (!inbox_.empty()) {
      xv::v1::DaemonMessage m = std::move(inbox_.front());
      inbox_.pop_front();
      if (pred(m)) {
        *out = std::move(m);
        return true;
      }
    }
    if (ended_) return false;
    if (cv_.wait_until(lock, end) == std::cv_status::timeout && inbox_.empty()) return false;
  }
}

bool WorkerSessionClient::ended() {
  std::lock_guard<std::mutex> lock(mu_);
  return ended_;
}

grpc::Status WorkerSessionClient::WaitForEnd(double timeout_s) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)),
                    [this] { return ended_; })) {
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                        "the session did not end within " + std::to_string(timeout_s) + " s");
  }
  return end_status_;
}

grpc::Status WorkerSessionClient::Close(double timeout_s) {
  {
    std::lock_guard<std::mutex> lock(write_mu_);
    if (!writes_done_) stream_->WritesDone();
  }
  grpc::Status s = WaitForEnd(timeout_s);
  if (s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED && !ended()) ctx_.TryCancel();
  return s;
}

xv::v1::Register WorkerSessionClient::MakeRegister(const std::string& name,
                                                   const std::vector<std::string>& trainers,
                                                   int max_concurrent) {
  xv::v1::Register reg;
  reg.set_worker_name(name);
  reg.mutable_device()->set_name("cpu: hostile test");
  reg.mutable_device()->set_vendor("cpu");
  reg.mutable_device()->set_backend("cpu");
  reg.mutable_device()->set_index(-1);
  for (const std::string& t : trainers) reg.mutable_capabilities()->add_trainers(t);
  reg.mutable_capabilities()->set_max_concurrent(max_concurrent);
  reg.set_version("hostile-test");
  return reg;
}

McpChild::McpChild(const std::vector<std::string>& argv,
                   const std::vector<std::pair<std::string, std::string>>& env,
                   const std::string& log_path, size_t address_space_bytes) {
  int in[2], out[2];
  if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) return;
  pid_ = ::fork();
  if (pid_ == 0) {
    ::setpgid(0, 0);
    const rlimit limit{address_space_bytes, address_space_bytes};
    ::setrlimit(RLIMIT_AS, &limit);
    for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
    ::dup2(in[0], STDIN_FILENO);
    ::dup2(out[1], STDOUT_FILENO);
    int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (log >= 0) ::dup2(log, STDERR_FILENO);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ::close(in[0]);
  ::close(out[1]);
  to_child_ = in[1];
  from_child_ = out[0];
}

McpChild::~McpChild() {
  if (to_child_ >= 0) ::close(to_child_);
  Kill();
  if (from_child_ >= 0) ::close(from_child_);
}

bool McpChild::Alive() {
  if (pid_ <= 0 || reaped_) return false;
  int st = 0;
  if (::waitpid(pid_, &st, WNOHANG) == pid_) {
    reaped_ = true;
    return false;
  }
  return true;
}

void McpChild::Kill() {
  if (pid_ <= 0 || reaped_) return;
  ::kill(-pid_, SIGKILL);
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  reaped_ = true;
}

bool McpChild::SendLine(const std::string& line) {
  // A child that died or stopped reading must not block the test: write with poll and a limit.
  const std::string data = line + "\n";
  size_t off = 0;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (off < data.size()) {
    pollfd p{to_child_, POLLOUT, 0};
    if (std::chrono::steady_clock::now() > end) return false;
    if (::poll(&p, 1, 200) <= 0) continue;
    if (p.revents & (POLLERR | POLLHUP)) return false;
    ssize_t n = ::write(to_child_, data.data() + off, data.size() - off);
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

bool McpChild::ReadLine(std::string* line, double timeout_s, bool* hung) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  *hung = false;
  while (true) {
    size_t nl = buffer_.find('\n');
    if (nl != std::string::npos) {
      *line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      return true;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) {
      *hung = true;
      return false;
    }
    pollfd p{from_child_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    char chunk[65536];
    ssize_t n = ::read(from_child_, chunk, sizeof chunk);
    if (n <= 0) return false;
    buffer_.append(chunk, static_cast<size_t>(n));
  }
}

bool McpChild::Request(const json& request, double timeout_s, json* response, std::string* raw,
                       bool* hung) {
  *hung = false;
  if (!SendLine(request.dump())) return false;
  return WaitReply(request.value("id", json()), timeout_s, response, raw, hung);
}

bool McpChild::WaitReply(const json& id, double timeout_s, json* response, std::string* raw,
                         bool* hung) {
  *hung = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  std::string line;
  while (true) {
    const double left =
        std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) {
      *hung = true;
      return false;
    }
    if (!ReadLine(&line, left, hung)) return false;
    json m = json::parse(line, nullptr, false);
    if (m.is_discarded() || !m.is_object()) continue;  // not a JSON-RPC message: skipped
    const bool same_id = m.contains("id") && m["id"] == id;
    const bool null_id_error = m.contains("id") && m["id"].is_null() && m.contains("error");
    if (same_id || null_id_error) {
      *response = std::move(m);
      *raw = line;
      return true;
    }
  }
}

std::string NestedJsonArray(size_t depth) {
  return std::string(depth, '[') + std::string(depth, ']');
}

}  // namespace xv::hostile
