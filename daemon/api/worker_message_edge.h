// The daemon's edge for what workers send (proto/xv/v1/workers.proto): trainer text arrives as
// `bytes` and may hold anything, other strings may be of any length. Before anything is stored or
// acted on, a message goes through here: trainer text is made valid UTF-8 and cut on code-point
// boundaries to the store's limits, Register is checked (the worker name is a name, list sizes
// are bounded, max_concurrent is capped). Repairs are not errors (a trainer may print anything);
// they come back as notes for a warning that names the field. Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "xv/v1/workers.pb.h"

namespace xv::daemon {

// Limits of the worker edge (docs/worker.md § Trainer text and limits).
inline constexpr int kMaxWorkerConcurrency = 8;  // Capabilities.max_concurrent is capped to it
inline constexpr size_t kMaxProbeJsonBytes = 64 * 1024;    // Register.probe_json (refused beyond)
inline constexpr size_t kMaxFingerprintBytes = 64 * 1024;  // Device.fingerprint_json (cut)
inline constexpr size_t kMaxStderrTailBytes = 64 * 1024;   // Finished.stderr_tail (its end kept)
inline constexpr int kMaxRegisterListEntries = 64;         // trainers, attention_backends, dtypes
inline constexpr int kMaxEnvKnobs = 256;
inline constexpr int kMaxRunningAttempts = 1024;  // Register.running, Heartbeat.running

// What could be read of a worker message that does not parse (see ParseWorkerMessage).
struct UnreadableWorkerMessage {
  enum class Kind { kOther, kEvent, kFinished };
  Kind kind = Kind::kOther;
  int64_t experiment_id = 0;  // for an event or a Finished, when its wire data names them
  int32_t attempt = 0;
  int64_t seq = 0;  // an event's
};

// Parses the wire bytes of a WorkerMessage. When they do not parse, INVALID_ARGUMENT naming the
// field ("worker message: finished.failure_kind: not valid UTF-8 (a proto3 string field)"), or
// saying the wire data is malformed, and *unreadable says what kind of message it was and whose
// (read from the raw wire data, field by field, without the check that failed). Never echoes the
// field's contents.
Status ParseWorkerMessage(const std::string& wire, xv::v1::WorkerMessage* out,
                          UnreadableWorkerMessage* unreadable);

// Checks a Register and bounds it in place. INVALID_ARGUMENT naming the field for what cannot be
// repaired: an empty or invalid worker name (common/untrusted_text.h CheckTextField), an invalid
// trainer name, a probe over kMaxProbeJsonBytes, too many running attempts or list entries.
// Device strings are cut (names to kMaxNameBytes, the fingerprint to kMaxFingerprintBytes), env
// knobs beyond kMaxEnvKnobs dropped, probe_json made valid UTF-8, max_concurrent clamped to
// [1, kMaxWorkerConcurrency]. *notes receives one line per repair.
Status CheckRegister(xv::v1::Register* reg, std::vector<std::string>* notes);

// Makes an event's trainer text storable: `type` valid UTF-8 of at most kMaxKindBytes, `json`
// valid UTF-8 (the store cuts it to its own limit). Returns one note per repair.
std::vector<std::string> RepairTrainerEvent(xv::v1::TrainerEvent* ev);

// Makes a Finished storable: failure_detail valid UTF-8 of at most kMaxDetailBytes, stderr_tail
// valid UTF-8 keeping its last kMaxStderrTailBytes, state and failure_kind at most kMaxKindBytes
// (an unknown state is then refused by the store's own check). Returns one note per repair.
std::vector<std::string> RepairFinished(xv::v1::Finished* f);

}  // namespace xv::daemon
