// TrainerOutputRelay: a running trainer's output, as the attempt keeps it. Every stdout line ('\n'
// or '\r' ended; a line over 4 MiB is cut there) is read in the trainer's output format
// (worker/trainer_output_reader.h) into TrainerEvents of seq 1, 2, 3 ..., each relayed to the
// attempt's callback and appended as JSON to SPEC_DIR/events.jsonl, flushed after the lines of
// every read; stderr is copied to SPEC_DIR/trainer.stderr.log and its last lines kept.
//
// Thread-safety: none; one relay per attempt, used by the attempt's thread.
#pragma once

#include <cstdint>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "worker/line_tail.h"
#include "worker/trainer_config.h"
#include "worker/trainer_output_reader.h"
#include "xv/v1/types.pb.h"
#include "xv/v1/workers.pb.h"

namespace xv::worker {

using TrainerEventCallback = std::function<void(const v1::TrainerEvent&)>;

class TrainerOutputRelay {
 public:
  // Creates (truncates) SPEC_DIR/events.jsonl and SPEC_DIR/trainer.stderr.log. `on_event` is
  // called for every event, on the thread that calls the Drain and Finish methods; it and `spec`
  // must outlive the relay.
  TrainerOutputRelay(const v1::ExperimentSpec& spec, const std::string& spec_dir,
                     TrainerOutputFormat format, size_t stderr_tail_lines,
                     const TrainerEventCallback& on_event);

  // Reads everything `fd` (non-blocking) has now. False at end of file or on a read error (the
  // caller closes the pipe), true when it would block.
  bool DrainStdout(int fd);
  bool DrainStderr(int fd);

  // Relays an event the worker makes itself (an autoresearch trainer's `source` event) as the
  // next seq, exactly as a trainer's. REQUIRES: `event` is an object with a string `type`.
  void RelayWorkerEvent(const nlohmann::json& event);
  // See TrainerOutputReader::SetUpstreamMetricVersion.
  void SetUpstreamMetricVersion(const std::string& version) {
    reader_.SetUpstreamMetricVersion(version);
  }

  // The end of stdout: a last line without its end, then whatever the reader still holds. Logs
  // the malformed upstream lines it ignored, if any.
  void Finish();

  const TrainerOutputReader& reader() const { return reader_; }
  // The seq of the last event relayed (0: none).
  int64_t last_seq() const { return seq_; }
  // The last stderr lines (stderr_tail_lines of them).
  std::string StderrTail() const { return tail_.Text(); }

 private:
  void TakeStdout(const char* data, size_t n);
  void ReadLine(const std::string& line);
  void Relay(const std::vector<TrainerOutputEvent>& events);

  const v1::ExperimentSpec& spec_;
  const TrainerEventCallback& on_event_;
  std::ofstream events_file_;
  std::ofstream stderr_file_;
  TrainerOutputReader reader_;
  LineTail tail_;
  std::string partial_line_;  // stdout read after the last line end
  int64_t seq_ = 0;
};

}  // namespace xv::worker
