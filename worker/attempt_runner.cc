#include "worker/attempt_runner.h"

#include <google/protobuf/util/json_util.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <spdlog/spdlog.h>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/untrusted_text.h"
#include "worker/command_trainer.h"
#include "worker/device_health/health_report.h"
#include "worker/exit_classification.h"
#include "worker/line_tail.h"
#include "worker/trainer_output_reader.h"

namespace xv::worker {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kMaxEventLineBytes = 4 << 20;
// The stderr tail a Finished carries: its last 64 KiB at most (the daemon keeps 16 KiB).
constexpr size_t kMaxStderrTailBytes = 64 << 10;

double SecondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

int64_t UnixMillisNow() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return Status::IoError(path + ": cannot open for writing");
  f << text;
  f.close();
  if (!f) return Status::IoError(path + ": write failed");
  return Status::Ok();
}

std::string ConfiguredNames(const std::vector<TrainerConfig>& trainers) {
  std::string names;
  for (const TrainerConfig& t : trainers) names += (names.empty() ? "" : ", ") + t.name;
  return names;
}

}  // namespace

AttemptRunner::AttemptRunner(TrainerInvocation invocation, ProcessLauncher* launcher)
    : inv_(std::move(invocation)), launcher_(launcher) {}

std::string AttemptRunner::SpecDir(int64_t experiment_id, int32_t attempt) const {
  return inv_.work_dir + "/exp-" + std::to_string(experiment_id) + "-a" + std::to_string(attempt);
}

void AttemptRunner::Cancel(int64_t experiment_id, int32_t attempt) {
  std::lock_guard<std::mutex> lock(mu_);
  if (running_experiment_ == 0) return;
  if (experiment_id != 0 && experiment_id != running_experiment_) return;
  if (attempt != 0 && attempt != running_attempt_) return;
  cancel_requested_ = true;
}

v1::Finished AttemptRunner::Run(const v1::ExperimentSpec& spec,
                                const std::function<void(const v1::TrainerEvent&)>& on_event) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    running_experiment_ = spec.experiment_id();
    running_attempt_ = spec.attempt();
    cancel_requested_ = false;
  }
  struct ClearRunning {
    AttemptRunner* r;
    ~ClearRunning() {
      std::lock_guard<std::mutex> lock(r->mu_);
      r->running_experiment_ = 0;
      r->running_attempt_ = 0;
    }
  } clear_running{this};

  v1::Finished fin;
  fin.set_experiment_id(spec.experiment_id());
  fin.set_attempt(spec.attempt());
  const auto t0 = Clock::now();
  auto fail_before_start = [&](const std::string& detail) {
    spdlog::error("experiment {} attempt {}: {}", spec.experiment_id(), spec.attempt(), detail);
    fin.set_exit_code(-1);
    fin.set_state("failed");
    fin.set_failure_kind("crashed");
    fin.set_failure_detail(SanitizeAndTruncateUtf8(detail, kMaxDetailBytes));
    fin.set_wall_seconds(SecondsSince(t0));
    return fin;
  };

  const std::string spec_dir = SpecDir(spec.experiment_id(), spec.attempt());
  std::error_code ec;
  std::filesystem::create_directories(spec_dir, ec);
  if (ec) return fail_before_start(spec_dir + ": cannot create: " + ec.message());
  const WorkerConfig config =
      inv_.trainers.empty() ? DefaultWorkerConfig() : WorkerConfig{inv_.trainers};
  const TrainerConfig* trainer = FindTrainer(config, spec.trainer());
  if (trainer == nullptr) {
    return fail_before_start("trainer '" + spec.trainer() +
                             "' is not configured on this worker (configured: " +
                             ConfiguredNames(config.trainers) + ")");
  }
  const bool is_command = trainer->kind == TrainerKind::kCommand;
  const std::string recipe_path = spec_dir + "/recipe.json";
  Status st = WriteFile(recipe_path, spec.recipe_json());
  if (st.ok() && !is_command) {
    std::string spec_json;
    google::protobuf::util::JsonPrintOptions opts;
    opts.add_whitespace = true;
    opts.preserve_proto_field_names = true;
    (void)google::protobuf::util::MessageToJsonString(spec, &spec_json, opts);
    st = WriteFile(spec_dir + "/spec.json", spec_json);
  }
  if (!st.ok()) return fail_before_start(st.message());
  std::ofstream stderr_file(spec_dir + "/trainer.stderr.log", std::ios::binary | std::ios::trunc);
  std::ofstream events_file(spec_dir + "/events.jsonl", std::ios::binary | std::ios::trunc);

  ChildSpec cs;
  if (is_command) {
    st = PrepareCommandTrainer(
        *trainer, spec, {inv_.data_dir, inv_.device_flag, inv_.visible_devices}, spec_dir, &cs);
    if (!st.ok()) return fail_before_start(st.message());
  } else {
    const std::string program = trainer->program.empty() ? inv_.trainer_bin : trainer->program;
    cs.argv = {program,  "train",       "--recipe-json", recipe_path,
               "--data", inv_.data_dir, "--device",      inv_.device_flag};
    cs.env_overrides = trainer->env;
    cs.env_overrides.insert(cs.env_overrides.end(),
                            {{"CUDA_VISIBLE_DEVICES", inv_.visible_devices},
                             {"HIP_VISIBLE_DEVICES", inv_.visible_devices},
                             {"XV_EXPERIMENT_ID", std::to_string(spec.experiment_id())},
                             {"XV_ATTEMPT", std::to_string(spec.attempt())},
                             {"XV_SPEC_DIR", spec_dir}});
    cs.working_dir = spec_dir;
  }
  // Thermal guard: a device above --max-start-temp gets time to cool before the attempt starts.
  device_health::DeviceHealthMonitor::GuardResult guard;
  if (inv_.health) {
    guard = inv_.health->WaitUntilCool([this] { return cancel_requested_.load(); },
                                       "experiment " + std::to_string(spec.experiment_id()) +
                                           " attempt " + std::to_string(spec.attempt()));
    if (guard.cancelled) {
      fin.set_exit_code(-1);
      fin.set_state("cancelled");
      fin.set_failure_kind("cancelled");
      fin.set_failure_detail("cancelled while waiting for the device to cool");
      fin.set_wall_seconds(SecondsSince(t0));
      return fin;
    }
  }
  std::unique_ptr<ChildProcess> child;
  st = launcher_->Launch(cs, &child);
  if (!st.ok()) return fail_before_start("cannot start the trainer: " + st.message());
  spdlog::info("experiment {} attempt {}: started trainer '{}' ({}, pid {}) in {}",
               spec.experiment_id(), spec.attempt(), trainer->name, cs.argv[0], child->pid(),
               spec_dir);
  std::unique_ptr<device_health::Sampling> sampling;
  if (inv_.health) sampling = inv_.health->StartSampling();

  double deadline_s = spec.hard_deadline_s();
  if (deadline_s <= 0 && spec.time_budget_s() > 0) {
    deadline_s = spec.time_budget_s() + inv_.default_deadline_allowance_s;
  }

  LineTail tail(inv_.stderr_tail_lines);
  TrainerOutputReader output(trainer->output);
  std::string out_buf;
  int64_t seq = 0;
  KillReason kill_reason = KillReason::kNone;
  bool term_sent = false, kill_sent = false;
  Clock::time_point term_at;
  ExitStatus exit;
  bool reaped = false;
  Clock::time_point reaped_at;

  auto relay = [&](const std::vector<TrainerOutputEvent>& events) {
    for (const TrainerOutputEvent& read : events) {
      v1::TrainerEvent ev;
      ev.set_experiment_id(spec.experiment_id());
      ev.set_attempt(spec.attempt());
      ev.set_seq(++seq);
      ev.set_unix_ms(UnixMillisNow());
      // Trainer text: valid UTF-8 whatever the trainer printed (proto/xv/v1/workers.proto).
      ev.set_type(SanitizeAndTruncateUtf8(read.type, kMaxKindBytes));
      ev.set_json(IsValidUtf8(read.json) ? read.json : SanitizeUtf8(read.json));
      events_file << ev.json() << '\n';
      on_event(ev);
    }
  };
  auto emit_line = [&](const std::string& line) {
    if (line.find_first_not_of(" \t") == std::string::npos) return;
    relay(output.ReadLine(line, UnixMillisNow() / 1000.0));
  };
  auto drain_fd = [&](int fd, bool is_stdout) -> bool {  // false at EOF or error
    char buf[65536];
    while (true) {
      ssize_t n = ::read(fd, buf, sizeof(buf));
      if (n > 0) {
        if (is_stdout) {
          out_buf.append(buf, n);
          // '\r' ends a line too: upstream prints its progress with end="\r".
          size_t start = 0, nl;
          while ((nl = out_buf.find_first_of("\r\n", start)) != std::string::npos) {
            emit_line(out_buf.substr(start, nl - start));
            start = nl + 1;
          }
          out_buf.erase(0, start);
          if (out_buf.size() > kMaxEventLineBytes) {
            emit_line(out_buf);
            out_buf.clear();
          }
          // The lines of one read reach the file now: a worker killed mid-attempt leaves an
          // events.jsonl of whole lines that anyone can read while the trainer runs.
          events_file.flush();
        } else {
          stderr_file.write(buf, n);
          stderr_file.flush();
          tail.Append(std::string_view(buf, n));
        }
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
      if (n < 0 && errno == EINTR) continue;
      return false;
    }
  };

  while (true) {
    // Deadline and cancel: TERM the group, then KILL after the grace.
    if (kill_reason == KillReason::kNone && !reaped) {
      if (cancel_requested_) {
        kill_reason = KillReason::kCancel;
      } else if (deadline_s > 0 && SecondsSince(t0) > deadline_s) {
        kill_reason = KillReason::kDeadline;
      }
      if (kill_reason != KillReason::kNone) {
        spdlog::warn("experiment {} attempt {}: {}; sending SIGTERM to process group {}",
                     spec.experiment_id(), spec.attempt(),
                     kill_reason == KillReason::kCancel ? "cancelled" : "hard deadline reached",
                     child->pid());
        (void)child->SignalGroup(SIGTERM);
        term_sent = true;
        term_at = Clock::now();
      }
    }
    if (term_sent && !kill_sent && SecondsSince(term_at) > inv_.kill_grace_s) {
      spdlog::warn("experiment {} attempt {}: still alive {:.0f} s after SIGTERM; sending SIGKILL",
                   spec.experiment_id(), spec.attempt(), inv_.kill_grace_s);
      (void)child->SignalGroup(SIGKILL);
      kill_sent = true;
    }

    pollfd fds[2];
    int nfds = 0;
    if (child->stdout_fd() >= 0) fds[nfds++] = {child->stdout_fd(), POLLIN, 0};
    if (child->stderr_fd() >= 0) fds[nfds++] = {child->stderr_fd(), POLLIN, 0};
    if (nfds > 0) {
      int r = ::poll(fds, nfds, 100);
      if (r < 0 && errno != EINTR) break;
      for (int i = 0; i < nfds; ++i) {
        if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        bool is_stdout = fds[i].fd == child->stdout_fd();
        if (!drain_fd(fds[i].fd, is_stdout)) {
          if (is_stdout) {
            child->CloseStdout();
          } else {
            child->CloseStderr();
          }
        }
      }
    } else {
      ::usleep(20000);
    }

    if (!reaped && child->TryReap(&exit)) {
      reaped = true;
      reaped_at = Clock::now();
      // Whatever the trainer started in its group goes with it.
      (void)child->SignalGroup(SIGKILL);
    }
    if (reaped && nfds == 0) break;
    // A grandchild holding the pipes open must not keep the attempt alive.
    if (reaped && SecondsSince(reaped_at) > 2.0) break;
  }
  if (!out_buf.empty()) emit_line(out_buf);
  relay(output.Finish(UnixMillisNow() / 1000.0));
  if (output.malformed_lines() > 0) {
    spdlog::warn("experiment {} attempt {}: {} malformed upstream output line(s) ignored, e.g. {}",
                 spec.experiment_id(), spec.attempt(), output.malformed_lines(),
                 QuoteExcerpt(output.malformed_examples().front()));
  }
  if (!reaped) {
    (void)child->SignalGroup(SIGKILL);
    while (!child->TryReap(&exit)) ::usleep(10000);
  }
  child.reset();
  if (sampling) {
    device_health::HealthSummary health = sampling->Stop();
    health.start_temp_c = guard.start_temp_c;
    health.start_wait_s = guard.waited_s;
    device_health::HealthSummaryToProto(health, fin.mutable_health());
  }

  AttemptOutcome outcome = ApplyOutputVerdict(
      ClassifyExit(exit, kill_reason, deadline_s, output.error_message()), kill_reason, output,
      /*require_summary=*/is_command);
  fin.set_exit_code(exit.exited ? exit.exit_code : -1);
  fin.set_signal(exit.exited ? 0 : exit.term_signal);
  fin.set_state(outcome.state);
  fin.set_failure_kind(outcome.failure_kind);
  fin.set_failure_detail(SanitizeAndTruncateUtf8(outcome.failure_detail, kMaxDetailBytes));
  fin.set_stderr_tail(std::string(Utf8Suffix(tail.Text(), kMaxStderrTailBytes)));
  fin.set_wall_seconds(SecondsSince(t0));
  fin.set_last_seq(seq);
  spdlog::info("experiment {} attempt {}: {}{}{} after {:.1f} s ({} events)", spec.experiment_id(),
               spec.attempt(), fin.state(), fin.failure_kind().empty() ? "" : "/",
               fin.failure_kind(), fin.wall_seconds(), seq);
  return fin;
}

}  // namespace xv::worker
