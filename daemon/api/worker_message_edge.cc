#include "daemon/api/worker_message_edge.h"

#include <algorithm>

#include "common/untrusted_text.h"

namespace xv::daemon {
namespace {

// Repairs `*text` to valid UTF-8 of at most `max_bytes`, keeping its start (or its end, for a
// tail). Adds a note naming `field` when anything changed.
void RepairText(const std::string& field, std::string* text, size_t max_bytes, bool keep_end,
                std::vector<std::string>* notes) {
  const bool valid = IsValidUtf8(*text);
  if (valid && text->size() <= max_bytes) return;
  const size_t before = text->size();
  std::string clean = valid ? std::move(*text) : SanitizeUtf8(*text);
  *text = keep_end ? std::string(Utf8Suffix(clean, max_bytes))
                   : std::string(Utf8Prefix(clean, max_bytes));
  notes->push_back(field + ": " + (valid ? "" : "invalid UTF-8 replaced by U+FFFD, ") +
                   std::to_string(before) + " bytes kept as " + std::to_string(text->size()));
}

Status CheckListSize(const std::string& field, int size, int max) {
  if (size <= max) return Status::Ok();
  return Status::InvalidArgument(field + ": " + std::to_string(size) +
                                 " entries, over the limit of " + std::to_string(max));
}

}  // namespace

Status CheckRegister(xv::v1::Register* reg, std::vector<std::string>* notes) {
  if (reg->worker_name().empty()) {
    return Status::InvalidArgument("register.worker_name: must not be empty (xv-worker --name)");
  }
  XV_RETURN_IF_ERROR(CheckTextField("register.worker_name", reg->worker_name(), kMaxNameBytes,
                                    /*is_name=*/true));
  if (reg->probe_json().size() > kMaxProbeJsonBytes) {
    return Status::InvalidArgument(
        "register.probe_json: " + std::to_string(reg->probe_json().size()) +
        " bytes, over the limit of " + std::to_string(kMaxProbeJsonBytes));
  }
  RepairText("register.probe_json", reg->mutable_probe_json(), kMaxProbeJsonBytes, false, notes);
  XV_RETURN_IF_ERROR(CheckListSize("register.running", reg->running_size(), kMaxRunningAttempts));
  RepairText("register.version", reg->mutable_version(), kMaxKindBytes, false, notes);

  xv::v1::Device* d = reg->mutable_device();
  for (auto [name, field] : {std::pair{"name", d->mutable_name()},
                             {"vendor", d->mutable_vendor()},
                             {"backend", d->mutable_backend()},
                             {"driver", d->mutable_driver()},
                             {"runtime", d->mutable_runtime()},
                             {"torch_version", d->mutable_torch_version()},
                             {"os", d->mutable_os()},
                             {"hostname", d->mutable_hostname()},
                             {"peak_flops_source", d->mutable_peak_flops_source()}}) {
    RepairText(std::string("register.device.") + name, field, kMaxNameBytes, false, notes);
  }
  RepairText("register.device.fingerprint_json", d->mutable_fingerprint_json(),
             kMaxFingerprintBytes, false, notes);
  auto* knobs = d->mutable_env_knobs();
  if (static_cast<int>(knobs->size()) > kMaxEnvKnobs) {
    notes->push_back("register.device.env_knobs: " + std::to_string(knobs->size()) +
                     " entries, only the first " + std::to_string(kMaxEnvKnobs) + " kept");
  }
  google::protobuf::Map<std::string, std::string> kept;
  for (const auto& [k, v] : *knobs) {
    if (static_cast<int>(kept.size()) >= kMaxEnvKnobs) break;
    std::string key = k, value = v;
    RepairText("register.device.env_knobs key", &key, kMaxNameBytes, false, notes);
    RepairText("register.device.env_knobs[" + QuoteExcerpt(key, 40) + "]", &value,
               kMaxDetailBytes / 4, false, notes);
    kept[key] = value;
  }
  knobs->swap(kept);

  xv::v1::Capabilities* caps = reg->mutable_capabilities();
  XV_RETURN_IF_ERROR(CheckListSize("register.capabilities.trainers", caps->trainers_size(),
                                   kMaxRegisterListEntries));
  for (int i = 0; i < caps->trainers_size(); ++i) {
    XV_RETURN_IF_ERROR(CheckTextField("register.capabilities.trainers[" + std::to_string(i) + "]",
                                      caps->trainers(i), kMaxKindBytes, /*is_name=*/true));
  }
  XV_RETURN_IF_ERROR(CheckListSize("register.capabilities.attention_backends",
                                   caps->attention_backends_size(), kMaxRegisterListEntries));
  for (std::string& b : *caps->mutable_attention_backends()) {
    RepairText("register.capabilities.attention_backends", &b, kMaxKindBytes, false, notes);
  }
  XV_RETURN_IF_ERROR(
      CheckListSize("register.capabilities.dtypes", caps->dtypes_size(), kMaxRegisterListEntries));
  for (std::string& t : *caps->mutable_dtypes()) {
    RepairText("register.capabilities.dtypes", &t, kMaxKindBytes, false, notes);
  }
  const int asked = caps->max_concurrent();
  const int granted = std::clamp(asked, 1, kMaxWorkerConcurrency);
  if (asked > kMaxWorkerConcurrency) {
    notes->push_back("register.capabilities.max_concurrent: " + std::to_string(asked) +
                     " capped to " + std::to_string(granted));
  }
  caps->set_max_concurrent(granted);
  return Status::Ok();
}

std::vector<std::string> RepairTrainerEvent(xv::v1::TrainerEvent* ev) {
  std::vector<std::string> notes;
  const std::string at = "event " + std::to_string(ev->seq()) + ": ";
  RepairText(at + "type", ev->mutable_type(), kMaxKindBytes, false, &notes);
  if (!IsValidUtf8(ev->json())) {
    notes.push_back(at + "json: invalid UTF-8 replaced by U+FFFD");
    ev->set_json(SanitizeUtf8(ev->json()));
  }
  return notes;
}

std::vector<std::string> RepairFinished(xv::v1::Finished* f) {
  std::vector<std::string> notes;
  RepairText("finished.state", f->mutable_state(), kMaxKindBytes, false, &notes);
  RepairText("finished.failure_kind", f->mutable_failure_kind(), kMaxKindBytes, false, &notes);
  RepairText("finished.failure_detail", f->mutable_failure_detail(), kMaxDetailBytes, false,
             &notes);
  RepairText("finished.stderr_tail", f->mutable_stderr_tail(), kMaxStderrTailBytes,
             /*keep_end=*/true, &notes);
  return notes;
}

}  // namespace xv::daemon
