#include "worker/attempt_runner.h"

#include <google/protobuf/util/json_util.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <spdlog/spdlog.h>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <optional>

#include "common/steady_clock_time.h"
#include "common/text_file.h"
#include "common/untrusted_text.h"
#include "worker/autoresearch_trainer.h"
#include "worker/command_trainer.h"
#include "worker/device_health/health_report.h"
#include "worker/exit_classification.h"
#include "worker/kill_escalation.h"
#include "worker/trainer_output_relay.h"
#include "worker/trainer_sandbox.h"

namespace xv::worker {
namespace {

// The stderr tail a Finished carries: its last 64 KiB at most (the daemon keeps 16 KiB).
constexpr size_t kMaxStderrTailBytes = 64 << 10;
// How long one wait for the trainer's output lasts, and the pause when both its pipes are closed.
constexpr int kOutputPollMs = 100;
constexpr useconds_t kClosedPipesPauseUs = 20000;

std::string ConfiguredNames(const std::vector<TrainerConfig>& trainers) {
  std::string names;
  for (const TrainerConfig& t : trainers) names += (names.empty() ? "" : ", ") + t.name;
  return names;
}

// "experiment 12 attempt 1", for logs.
std::string AttemptName(const v1::ExperimentSpec& spec) {
  return "experiment " + std::to_string(spec.experiment_id()) + " attempt " +
         std::to_string(spec.attempt());
}

// What an attempt has once its spec dir is ready.
struct PreparedAttempt {
  std::string spec_dir;
  TrainerConfig trainer;    // the plugin the spec names
  bool is_command = false;  // command or autoresearch
  // An autoresearch trainer's rewritten source (set by BuildChildSpec).
  std::optional<AutoresearchAttempt> autoresearch;
};

double UnixSecondsNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The Finished of an attempt that ends before its trainer runs (kind "" = crashed, or cancelled
// for a cancelled one).
v1::Finished FinishedWithoutTrainer(const v1::ExperimentSpec& spec, const std::string& state,
                                    const std::string& detail, SteadyClock::time_point started_at,
                                    const std::string& kind = "") {
  v1::Finished fin;
  fin.set_experiment_id(spec.experiment_id());
  fin.set_attempt(spec.attempt());
  fin.set_exit_code(-1);
  fin.set_state(state);
  fin.set_failure_kind(!kind.empty() ? kind : state == "cancelled" ? "cancelled" : "crashed");
  fin.set_failure_detail(SanitizeAndTruncateUtf8(detail, kMaxDetailBytes));
  fin.set_wall_seconds(SecondsSince(started_at));
  return fin;
}

// A launch failure, a missing trainer or an unwritable spec dir: the attempt failed (crashed).
v1::Finished FailedBeforeStart(const v1::ExperimentSpec& spec, const std::string& detail,
                               SteadyClock::time_point started_at) {
  spdlog::error("{}: {}", AttemptName(spec), detail);
  return FinishedWithoutTrainer(spec, "failed", detail, started_at);
}

// Creates the spec dir, finds the trainer plugin the spec names and writes the files it reads
// (recipe.json; spec.json for a libtorch trainer).
Status PrepareSpecDir(const TrainerInvocation& inv, const std::string& spec_dir,
                      const v1::ExperimentSpec& spec, PreparedAttempt* out) {
  out->spec_dir = spec_dir;
  std::error_code ec;
  std::filesystem::create_directories(spec_dir, ec);
  if (ec) return Status::IoError(spec_dir + ": cannot create: " + ec.message());
  const WorkerConfig config =
      inv.trainers.empty() ? DefaultWorkerConfig() : WorkerConfig{inv.trainers};
  const TrainerConfig* trainer = FindTrainer(config, spec.trainer());
  if (trainer == nullptr) {
    return Status::NotFound("trainer '" + spec.trainer() +
                            "' is not configured on this worker (configured: " +
                            ConfiguredNames(config.trainers) + ")");
  }
  out->trainer = *trainer;
  out->is_command = IsCommandLike(trainer->kind);
  XV_RETURN_IF_ERROR(WriteWholeFile(spec_dir + "/recipe.json", spec.recipe_json()));
  if (out->is_command) return Status::Ok();
  std::string spec_json;
  google::protobuf::util::JsonPrintOptions opts;
  opts.add_whitespace = true;
  opts.preserve_proto_field_names = true;
  // An ExperimentSpec always prints (no Any, no map with unknown types); spec.json is for people.
  (void)google::protobuf::util::MessageToJsonString(spec, &spec_json, opts);
  return WriteWholeFile(spec_dir + "/spec.json", spec_json);
}

// An autoresearch trainer's source cannot take the recipe (a knob without its constant): the
// attempt ends invalid before the trainer starts.
v1::Finished RefusedBeforeStart(const v1::ExperimentSpec& spec, const std::string& detail,
                                SteadyClock::time_point started_at) {
  spdlog::warn("{}: refused before start: {}", AttemptName(spec), detail);
  return FinishedWithoutTrainer(spec, "invalid", detail, started_at, "invalid_config");
}

// A sandboxed command-like trainer: bwrap around it, the attempt dir writable, the data, the
// prepare folder and a program outside the system folders (its venv included) readable.
Status SandboxChild(const TrainerInvocation& inv, const PreparedAttempt& prepared, ChildSpec* cs) {
  SandboxMounts mounts;
  mounts.attempt_dir = prepared.spec_dir;
  mounts.data_dir = inv.data_dir;
  if (prepared.autoresearch) mounts.read_only.push_back(prepared.autoresearch->prepare_dir);
  for (const std::string& folder : ProgramReadOnlyFolders(prepared.trainer.program)) {
    mounts.read_only.push_back(folder);
  }
  return SandboxedChild(mounts, cs);
}

// The trainer's command line, environment and working directory.
Status BuildChildSpec(const TrainerInvocation& inv, const v1::ExperimentSpec& spec,
                      PreparedAttempt* prepared_out, ChildSpec* cs) {
  const PreparedAttempt& prepared = *prepared_out;
  // A code candidate (issue 16) is a train.py: only an autoresearch trainer runs one.
  if (!spec.source_text().empty() && prepared.trainer.kind != TrainerKind::kAutoresearch) {
    return Status::InvalidArgument("trainer '" + prepared.trainer.name + "' is of kind " +
                                   TrainerKindName(prepared.trainer.kind) +
                                   " and runs no code candidate (an autoresearch trainer does)");
  }
  if (prepared.is_command) {
    const CommandTrainerContext context{inv.data_dir, inv.device_flag, inv.visible_devices};
    if (prepared.trainer.kind == TrainerKind::kAutoresearch) {
      AutoresearchAttempt a;
      XV_RETURN_IF_ERROR(
          PrepareAutoresearchTrainer(prepared.trainer, spec, context, prepared.spec_dir, cs, &a));
      prepared_out->autoresearch = std::move(a);
    } else {
      XV_RETURN_IF_ERROR(
          PrepareCommandTrainer(prepared.trainer, spec, context, prepared.spec_dir, cs));
    }
    return prepared.trainer.sandbox ? SandboxChild(inv, prepared, cs) : Status::Ok();
  }
  const std::string program =
      prepared.trainer.program.empty() ? inv.trainer_bin : prepared.trainer.program;
  cs->argv = {program,  "train",      "--recipe-json", prepared.spec_dir + "/recipe.json",
              "--data", inv.data_dir, "--device",      inv.device_flag};
  cs->env_overrides = prepared.trainer.env;
  cs->env_overrides.insert(cs->env_overrides.end(),
                           {{"CUDA_VISIBLE_DEVICES", inv.visible_devices},
                            {"HIP_VISIBLE_DEVICES", inv.visible_devices},
                            {"XV_EXPERIMENT_ID", std::to_string(spec.experiment_id())},
                            {"XV_ATTEMPT", std::to_string(spec.attempt())},
                            {"XV_SPEC_DIR", prepared.spec_dir}});
  cs->working_dir = prepared.spec_dir;
  return Status::Ok();
}

// The spec's hard deadline, or budget + the allowance when it has none (0: no deadline).
double DeadlineSeconds(const TrainerInvocation& inv, const v1::ExperimentSpec& spec) {
  double deadline_s = spec.hard_deadline_s();
  if (deadline_s <= 0 && spec.time_budget_s() > 0) {
    deadline_s = spec.time_budget_s() + inv.default_deadline_allowance_s;
  }
  return deadline_s;
}

// Sends the signals the escalation says are due now (TERM at a cancel or the deadline, KILL after
// the grace).
void SendDueSignals(const v1::ExperimentSpec& spec, double kill_grace_s,
                    const std::atomic<bool>& cancel_requested, ChildProcess* child,
                    KillEscalation* escalation) {
  while (true) {
    switch (escalation->Next(SteadyClock::now(), cancel_requested.load())) {
      case KillStep::kNone:
        return;
      case KillStep::kTerm:
        spdlog::warn(
            "{}: {}; sending SIGTERM to process group {}", AttemptName(spec),
            escalation->reason() == KillReason::kCancel ? "cancelled" : "hard deadline reached",
            child->pid());
        // SignalGroup fails only when kill(2) does for a live group; the KILL after the grace and
        // the reap below end the attempt either way.
        (void)child->SignalGroup(SIGTERM);
        break;
      case KillStep::kKill:
        spdlog::warn("{}: still alive {:.0f} s after SIGTERM; sending SIGKILL", AttemptName(spec),
                     kill_grace_s);
        (void)child->SignalGroup(SIGKILL);  // as above: the reap shows whether it worked
        break;
    }
  }
}

// Waits up to kOutputPollMs for the trainer's output and relays what came; closes a pipe at its
// end. Returns how many pipes were open (0: none, after a short pause), or -1 when poll failed.
int RelayOutputOnce(ChildProcess* child, TrainerOutputRelay* relay) {
  pollfd fds[2];
  int nfds = 0;
  if (child->stdout_fd() >= 0) fds[nfds++] = {child->stdout_fd(), POLLIN, 0};
  if (child->stderr_fd() >= 0) fds[nfds++] = {child->stderr_fd(), POLLIN, 0};
  if (nfds == 0) {
    ::usleep(kClosedPipesPauseUs);
    return 0;
  }
  const int r = ::poll(fds, nfds, kOutputPollMs);
  if (r < 0 && errno != EINTR) return -1;
  for (int i = 0; i < nfds; ++i) {
    if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    if (fds[i].fd == child->stdout_fd()) {
      if (!relay->DrainStdout(fds[i].fd)) child->CloseStdout();
    } else if (!relay->DrainStderr(fds[i].fd)) {
      child->CloseStderr();
    }
  }
  return nfds;
}

// Relays the trainer's output and enforces the cancel and the deadline until the trainer was
// reaped and its output ended (or the escalation's linger passed). Returns false when it stopped
// early (poll failed) with the trainer not yet reaped.
bool SuperviseUntilExit(const v1::ExperimentSpec& spec, double kill_grace_s,
                        const std::atomic<bool>& cancel_requested, ChildProcess* child,
                        TrainerOutputRelay* relay, KillEscalation* escalation, ExitStatus* exit) {
  while (true) {
    SendDueSignals(spec, kill_grace_s, cancel_requested, child, escalation);
    const int open_pipes = RelayOutputOnce(child, relay);
    if (open_pipes < 0) return escalation->reaped();
    if (!escalation->reaped() && child->TryReap(exit)) {
      escalation->MarkReaped(SteadyClock::now());
      // Whatever the trainer started in its group goes with it (a group already gone is Ok).
      (void)child->SignalGroup(SIGKILL);
    }
    if (escalation->StopReading(SteadyClock::now(), open_pipes > 0)) return true;
  }
}

// A trainer still running when supervision stopped early: KILL its group and wait for it.
void KillAndReap(ChildProcess* child, ExitStatus* exit) {
  (void)child->SignalGroup(SIGKILL);  // the reap below waits for the end either way
  while (!child->TryReap(exit)) ::usleep(10000);
}

// A sandboxed trainer that failed after the system denied it something: sandbox_denied.
void ApplySandboxVerdict(const std::string& stderr_tail, AttemptOutcome* outcome) {
  if (outcome->state != "failed") return;
  const std::string denial = SandboxDenial(stderr_tail);
  if (denial.empty()) return;
  outcome->failure_kind = kSandboxDeniedKind;
  outcome->failure_detail = "the sandbox denied the trainer: " + denial;
}

// The Finished of an attempt whose trainer ran: the exit and output classified, the stderr tail.
v1::Finished FinishedAfterRun(const v1::ExperimentSpec& spec, const ExitStatus& exit,
                              const KillEscalation& escalation, const TrainerOutputRelay& relay,
                              const PreparedAttempt& prepared, SteadyClock::time_point started_at) {
  AttemptOutcome outcome =
      ApplyOutputVerdict(ClassifyExit(exit, escalation.reason(), escalation.deadline_s(),
                                      relay.reader().error_message()),
                         escalation.reason(), relay.reader(),
                         /*require_summary=*/prepared.is_command);
  if (prepared.trainer.sandbox) ApplySandboxVerdict(relay.StderrTail(), &outcome);
  v1::Finished fin;
  fin.set_experiment_id(spec.experiment_id());
  fin.set_attempt(spec.attempt());
  fin.set_exit_code(exit.exited ? exit.exit_code : -1);
  fin.set_signal(exit.exited ? 0 : exit.term_signal);
  fin.set_state(outcome.state);
  fin.set_failure_kind(outcome.failure_kind);
  fin.set_failure_detail(SanitizeAndTruncateUtf8(outcome.failure_detail, kMaxDetailBytes));
  fin.set_stderr_tail(std::string(Utf8Suffix(relay.StderrTail(), kMaxStderrTailBytes)));
  fin.set_wall_seconds(SecondsSince(started_at));
  fin.set_last_seq(relay.last_seq());
  spdlog::info("{}: {}{}{} after {:.1f} s ({} events)", AttemptName(spec), fin.state(),
               fin.failure_kind().empty() ? "" : "/", fin.failure_kind(), fin.wall_seconds(),
               relay.last_seq());
  return fin;
}

}  // namespace

AttemptRunner::AttemptRunner(TrainerInvocation invocation, ProcessLauncher* launcher)
    : inv_(std::move(invocation)), launcher_(launcher) {}

std::string AttemptRunner::SpecDir(int64_t experiment_id, int32_t attempt) const {
  return inv_.work_dir + "/exp-" + std::to_string(experiment_id) + "-a" + std::to_string(attempt);
}

void AttemptRunner::Cancel(int64_t experiment_id, int32_t attempt) {
  MutexLock lock(&mu_);
  if (running_experiment_ == 0) return;
  if (experiment_id != 0 && experiment_id != running_experiment_) return;
  if (attempt != 0 && attempt != running_attempt_) return;
  cancel_requested_ = true;
}

void AttemptRunner::MarkRunning(const v1::ExperimentSpec& spec) {
  MutexLock lock(&mu_);
  running_experiment_ = spec.experiment_id();
  running_attempt_ = spec.attempt();
  cancel_requested_ = false;
}

void AttemptRunner::ClearRunning() {
  MutexLock lock(&mu_);
  running_experiment_ = 0;
  running_attempt_ = 0;
}

bool AttemptRunner::WaitForCoolDevice(const v1::ExperimentSpec& spec,
                                      device_health::DeviceHealthMonitor::GuardResult* guard) {
  if (inv_.health == nullptr) return true;
  *guard =
      inv_.health->WaitUntilCool([this] { return cancel_requested_.load(); }, AttemptName(spec));
  return !guard->cancelled;
}

v1::Finished AttemptRunner::Run(const v1::ExperimentSpec& spec,
                                const std::function<void(const v1::TrainerEvent&)>& on_event) {
  // 1. Cancel finds this attempt until Run returns.
  MarkRunning(spec);
  struct ClearOnReturn {
    AttemptRunner* runner;
    ~ClearOnReturn() { runner->ClearRunning(); }
  } clear_on_return{this};
  const SteadyClock::time_point started_at = SteadyClock::now();

  // 2. The spec dir, the trainer plugin and the files it reads.
  PreparedAttempt prepared;
  Status st = PrepareSpecDir(inv_, SpecDir(spec.experiment_id(), spec.attempt()), spec, &prepared);
  if (!st.ok()) return FailedBeforeStart(spec, st.message(), started_at);

  // 3. events.jsonl and trainer.stderr.log, created before the trainer can write anything.
  TrainerOutputRelay relay(spec, prepared.spec_dir, prepared.trainer.output, inv_.stderr_tail_lines,
                           on_event);

  // 4. The trainer's command line and environment; an autoresearch trainer's rewritten source
  // (a knob its file cannot take is refused here) announced by a `source` event.
  ChildSpec child_spec;
  st = BuildChildSpec(inv_, spec, &prepared, &child_spec);
  if (!st.ok() && st.code() == Status::Code::kInvalidArgument &&
      (prepared.trainer.kind == TrainerKind::kAutoresearch || !spec.source_text().empty())) {
    return RefusedBeforeStart(spec, st.message(), started_at);
  }
  if (!st.ok()) return FailedBeforeStart(spec, st.message(), started_at);
  if (prepared.autoresearch) {
    relay.SetUpstreamMetricVersion(kPrepareModuleMetricVersion);
    relay.RelayWorkerEvent(
        SourceEvent(*prepared.autoresearch, prepared.trainer.name, UnixSecondsNow()));
  }

  // 5. Thermal guard: a device above --max-start-temp gets time to cool before the attempt starts.
  device_health::DeviceHealthMonitor::GuardResult guard;
  if (!WaitForCoolDevice(spec, &guard)) {
    return FinishedWithoutTrainer(spec, "cancelled",
                                  "cancelled while waiting for the device to cool", started_at);
  }

  // 6. The trainer starts, in its own process group.
  std::unique_ptr<ChildProcess> child;
  st = launcher_->Launch(child_spec, &child);
  if (!st.ok())
    return FailedBeforeStart(spec, "cannot start the trainer: " + st.message(), started_at);
  spdlog::info("{}: started trainer '{}' ({}, pid {}) in {}", AttemptName(spec),
               prepared.trainer.name, child_spec.argv[0], child->pid(), prepared.spec_dir);

  // 7. Device health sampling while it runs.
  std::unique_ptr<device_health::Sampling> sampling;
  if (inv_.health) sampling = inv_.health->StartSampling();

  // 8. Its output relayed, the cancel and the deadline enforced, until it is reaped.
  KillEscalation escalation({DeadlineSeconds(inv_, spec), inv_.kill_grace_s}, started_at);
  ExitStatus exit;
  const bool reaped = SuperviseUntilExit(spec, inv_.kill_grace_s, cancel_requested_, child.get(),
                                         &relay, &escalation, &exit);

  // 9. The rest of its output; a trainer left running is killed and reaped.
  relay.Finish();
  if (!reaped) KillAndReap(child.get(), &exit);
  child.reset();

  // 10. The report: device health, then the exit and output classified.
  std::optional<device_health::HealthSummary> health;
  if (sampling) {
    health = sampling->Stop();
    health->start_temp_c = guard.start_temp_c;
    health->start_wait_s = guard.waited_s;
  }
  v1::Finished fin = FinishedAfterRun(spec, exit, escalation, relay, prepared, started_at);
  if (health) device_health::HealthSummaryToProto(*health, fin.mutable_health());
  return fin;
}

}  // namespace xv::worker
