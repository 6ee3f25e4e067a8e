#include "worker/trainer_output_relay.h"

#include <unistd.h>

#include <spdlog/spdlog.h>
#include <cerrno>
#include <chrono>

#include "common/bounded_json.h"
#include "common/untrusted_text.h"

namespace xv::worker {
namespace {

constexpr size_t kMaxEventLineBytes = 4 << 20;

int64_t UnixMillisNow() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Reads `fd` until it would block (true) or ends or fails (false), handing each chunk to `take`.
template <typename Take>
bool ReadAvailable(int fd, Take take) {
  char buf[65536];
  while (true) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n > 0) {
      take(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (n < 0 && errno == EINTR) continue;
    return false;
  }
}

}  // namespace

TrainerOutputRelay::TrainerOutputRelay(const v1::ExperimentSpec& spec, const std::string& spec_dir,
                                       TrainerOutputFormat format, size_t stderr_tail_lines,
                                       const TrainerEventCallback& on_event)
    : spec_(spec),
      on_event_(on_event),
      events_file_(spec_dir + "/events.jsonl", std::ios::binary | std::ios::trunc),
      stderr_file_(spec_dir + "/trainer.stderr.log", std::ios::binary | std::ios::trunc),
      reader_(format),
      tail_(stderr_tail_lines) {}

bool TrainerOutputRelay::DrainStdout(int fd) {
  return ReadAvailable(fd, [this](const char* data, size_t n) { TakeStdout(data, n); });
}

bool TrainerOutputRelay::DrainStderr(int fd) {
  return ReadAvailable(fd, [this](const char* data, size_t n) {
    stderr_file_.write(data, static_cast<std::streamsize>(n));
    stderr_file_.flush();
    tail_.Append(std::string_view(data, n));
  });
}

void TrainerOutputRelay::TakeStdout(const char* data, size_t n) {
  partial_line_.append(data, n);
  // '\r' ends a line too: upstream prints its progress with end="\r".
  size_t start = 0, end;
  while ((end = partial_line_.find_first_of("\r\n", start)) != std::string::npos) {
    ReadLine(partial_line_.substr(start, end - start));
    start = end + 1;
  }
  partial_line_.erase(0, start);
  if (partial_line_.size() > kMaxEventLineBytes) {
    ReadLine(partial_line_);
    partial_line_.clear();
  }
  // The lines of one read reach the file now: a worker killed mid-attempt leaves an events.jsonl
  // of whole lines that anyone can read while the trainer runs.
  events_file_.flush();
}

void TrainerOutputRelay::ReadLine(const std::string& line) {
  if (line.find_first_not_of(" \t") == std::string::npos) return;
  Relay(reader_.ReadLine(line, UnixMillisNow() / 1000.0));
}

void TrainerOutputRelay::Relay(const std::vector<TrainerOutputEvent>& events) {
  for (const TrainerOutputEvent& read : events) {
    v1::TrainerEvent ev;
    ev.set_experiment_id(spec_.experiment_id());
    ev.set_attempt(spec_.attempt());
    ev.set_seq(++seq_);
    ev.set_unix_ms(UnixMillisNow());
    // Trainer text: valid UTF-8 whatever the trainer printed (proto/xv/v1/workers.proto).
    ev.set_type(SanitizeAndTruncateUtf8(read.type, kMaxKindBytes));
    ev.set_json(IsValidUtf8(read.json) ? read.json : SanitizeUtf8(read.json));
    events_file_ << ev.json() << '\n';
    on_event_(ev);
  }
}

void TrainerOutputRelay::RelayWorkerEvent(const nlohmann::json& event) {
  Relay({TrainerOutputEvent{event["type"].get<std::string>(), DumpJsonLossless(event)}});
  events_file_.flush();
}

void TrainerOutputRelay::Finish() {
  if (!partial_line_.empty()) ReadLine(partial_line_);
  partial_line_.clear();
  Relay(reader_.Finish(UnixMillisNow() / 1000.0));
  if (reader_.malformed_lines() > 0) {
    spdlog::warn("experiment {} attempt {}: {} malformed upstream output line(s) ignored, e.g. {}",
                 spec_.experiment_id(), spec_.attempt(), reader_.malformed_lines(),
                 QuoteExcerpt(reader_.malformed_examples().front()));
  }
}

}  // namespace xv::worker
