// Fuzz target: trainer events applied by the daemon's store (daemon/store/store.h)
// through its real path, ApplyTrainerEvents, against a real SQLite database in a scratch directory.
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <google/protobuf/stubs/logging.h>
#include <spdlog/spdlog.h>

#include "daemon/store/store.h"
#include "fuzz_driver.h"
#include "fuzz_targets.h"

namespace xv::fuzz {

namespace {

namespace fs = std::filesystem;

// The event types the store interprets, and one it only stores.
constexpr const char* kTypes[] = {"start", "step", "nan", "summary", "error", "eval", "log"};

// A store with one experiment assigned to one worker, in a directory removed at exit (tmpfs when
// there is one: every applied batch is a committed write transaction). An input's events go to
// that attempt with the next sequence numbers; after kInputsPerAttempt inputs the attempt is
// finished and the next experiment assigned, so the finished and the live paths both run.
class ScratchStore {
 public:
  ScratchStore() {
    spdlog::set_level(spdlog::level::off);
#if GOOGLE_PROTOBUF_VERSION < 4022000
    google::protobuf::SetLogHandler(nullptr);
#endif
    std::error_code ec;
    const fs::path base =
        fs::is_directory("/dev/shm", ec) ? fs::path("/dev/shm") : fs::temp_directory_path();
    dir_ = (base / ("xv-fuzz-store-" + std::to_string(::getpid()))).string();
    fs::create_directories(dir_);
    Check(store::Store::Open(dir_ + "/xv.db", &store_), "open");
    xv::v1::Register reg;
    reg.set_worker_name("fuzz:cpu");
    reg.mutable_device()->set_name("cpu: fuzz");
    reg.mutable_device()->set_backend("cpu");
    reg.mutable_capabilities()->add_trainers("libtorch");
    Check(store_->workers().UpsertWorker(reg, &worker_), "register");
    NextExperiment();
  }
  ~ScratchStore() {
    store_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  store::Store* store() { return store_.get(); }
  int64_t worker() const { return worker_; }
  int64_t experiment() const { return experiment_; }
  int64_t NextSeq() { return ++seq_; }

  // Counts an input; every kInputsPerAttempt inputs, finishes the attempt and starts another.
  void Rotate(const std::string& state) {
    if (++inputs_ % kInputsPerAttempt != 0) return;
    xv::v1::Finished f;
    f.set_experiment_id(experiment_);
    f.set_attempt(1);
    f.set_state(state);
    f.set_last_seq(seq_);
    xv::v1::EventAck ack;
    const Status st = store_->attempts().FinishAttempt(worker_, f, &ack);
    XV_FUZZ_CHECK(st.ok(), "FinishAttempt: " + st.ToString());
    NextExperiment();
  }

 private:
  static constexpr int kInputsPerAttempt = 50;

  static void Check(const Status& st, const char* what) {
    if (!st.ok()) throw FuzzContractViolation(std::string(what) + ": " + st.ToString());
  }

  void NextExperiment() {
    store::NewSubmission sub;
    sub.campaign = "fuzz";
    sub.recipe_name = "fuzz";
    sub.recipe_yaml = "depth: 2\n";
    sub.base_hash = "base";
    sub.base_recipe_json = R"({"depth":2})";
    sub.base_resolved_json = R"({"depth":2})";
    store::NewExperiment e;
    e.name = "e" + std::to_string(++made_);
    e.overrides_json = R"({"matrix_lr":0.02})";
    e.seed = 42;
    e.recipe_hash = "hash-" + std::to_string(made_);
    e.recipe_json = R"({"depth":2})";
    e.resolved_json = R"({"depth":2})";
    e.time_budget_s = 20;
    e.hard_deadline_s = 340;
    sub.experiments.push_back(e);
    store::SubmissionIds ids;
    Check(store_->submissions().InsertSubmission(sub, &ids), "submit");
    experiment_ = ids.experiment_ids.at(0);
    xv::v1::ExperimentSpec spec;
    Check(store_->attempts().AssignExperiment(experiment_, worker_, &spec), "assign");
    seq_ = 0;
  }

  std::string dir_;
  std::unique_ptr<store::Store> store_;
  int64_t worker_ = 0;
  int64_t experiment_ = 0;
  int64_t seq_ = 0;
  int made_ = 0;
  int64_t inputs_ = 0;
};

ScratchStore& Scratch() {
  static ScratchStore s;
  return s;
}

}  // namespace

int FuzzStoreEvents(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  ScratchStore& s = Scratch();
  // Byte 0: the declared type of the first event and the state the attempt may end in; the rest,
  // split at '\n', one event JSON per line (the store reads the type inside the JSON first).
  const std::string declared = kTypes[data[0] % (sizeof kTypes / sizeof kTypes[0])];
  const std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::vector<xv::v1::TrainerEvent> events;
  size_t start = 0;
  while (start <= body.size() && events.size() < 64) {
    size_t nl = body.find('\n', start);
    if (nl == std::string::npos) nl = body.size();
    xv::v1::TrainerEvent ev;
    ev.set_experiment_id(s.experiment());
    ev.set_attempt(1);
    ev.set_seq(s.NextSeq());
    ev.set_type(events.empty() ? declared : "log");
    ev.set_json(body.substr(start, nl - start));
    ev.set_unix_ms(1700000000000 + ev.seq());
    events.push_back(std::move(ev));
    start = nl + 1;
  }
  store::AppliedEvents applied;
  const Status st = s.store()->attempts().ApplyTrainerEvents(s.worker(), events, &applied);
  XV_FUZZ_CHECK(st.ok(), "ApplyTrainerEvents: " + st.ToString());
  XV_FUZZ_CHECK(applied.rejected == 0 && applied.duplicates == 0,
                "events of the worker's own attempt were rejected or seen as duplicates");
  XV_FUZZ_CHECK(applied.acks.size() == 1 && applied.acks[0].seq() == events.back().seq(),
                "the acknowledgement is not the last event's seq");
  // What the store then serves for the experiment reads back.
  xv::v1::Experiment e;
  const Status got = s.store()->experiments().GetExperiment(s.experiment(), &e);
  XV_FUZZ_CHECK(got.ok(), "GetExperiment: " + got.ToString());
  s.Rotate(data[0] % 2 == 0 ? "succeeded" : "failed");
  return 0;
}

}  // namespace xv::fuzz
