#include "daemon/api/worker_message_edge.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/unknown_field_set.h>

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

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::UnknownField;
using google::protobuf::UnknownFieldSet;

// The path of the first field of `fields` (read as a `type` message) whose wire data cannot be
// what its declaration says: a string that is not valid UTF-8. Recursion follows the schema's
// message types only (the worker protocol has no recursive message), so its depth is bounded.
std::string FindUnparseableField(const UnknownFieldSet& fields, const Descriptor* type,
                                 const std::string& prefix) {
  for (int i = 0; i < fields.field_count(); ++i) {
    const UnknownField& f = fields.field(i);
    const FieldDescriptor* fd = type->FindFieldByNumber(f.number());
    if (fd == nullptr || f.type() != UnknownField::TYPE_LENGTH_DELIMITED) continue;
    const std::string path = prefix.empty() ? fd->name() : prefix + "." + fd->name();
    if (fd->type() == FieldDescriptor::TYPE_STRING && !IsValidUtf8(f.length_delimited())) {
      return path;
    }
    if (fd->type() == FieldDescriptor::TYPE_MESSAGE) {
      UnknownFieldSet nested;
      if (!nested.ParseFromString(f.length_delimited())) return path;
      std::string inner = FindUnparseableField(nested, fd->message_type(), path);
      if (!inner.empty()) return inner;
    }
  }
  return "";
}

// The last varint field `number` of `fields` (0 when absent).
int64_t VarintField(const UnknownFieldSet& fields, int number) {
  int64_t v = 0;
  for (int i = 0; i < fields.field_count(); ++i) {
    if (fields.field(i).number() == number && fields.field(i).type() == UnknownField::TYPE_VARINT)
      v = static_cast<int64_t>(fields.field(i).varint());
  }
  return v;
}

}  // namespace

Status ParseWorkerMessage(const std::string& wire, xv::v1::WorkerMessage* out,
                          UnreadableWorkerMessage* unreadable) {
  if (out->ParseFromString(wire)) return Status::Ok();
  *unreadable = UnreadableWorkerMessage();
  UnknownFieldSet fields;
  if (!fields.ParseFromString(wire)) {
    return Status::InvalidArgument("worker message: " + std::to_string(wire.size()) +
                                   " bytes of malformed wire data (not an xv.v1.WorkerMessage)");
  }
  for (int i = 0; i < fields.field_count(); ++i) {
    const UnknownField& f = fields.field(i);
    if (f.type() != UnknownField::TYPE_LENGTH_DELIMITED) continue;
    if (f.number() != xv::v1::WorkerMessage::kEventFieldNumber &&
        f.number() != xv::v1::WorkerMessage::kFinishedFieldNumber)
      continue;
    UnknownFieldSet inner;
    if (!inner.ParseFromString(f.length_delimited())) continue;
    unreadable->kind = f.number() == xv::v1::WorkerMessage::kEventFieldNumber
                           ? UnreadableWorkerMessage::Kind::kEvent
                           : UnreadableWorkerMessage::Kind::kFinished;
    unreadable->experiment_id = VarintField(inner, 1);  // experiment_id in both
    unreadable->attempt = static_cast<int32_t>(VarintField(inner, 2));
    unreadable->seq = unreadable->kind == UnreadableWorkerMessage::Kind::kEvent
                          ? VarintField(inner, xv::v1::TrainerEvent::kSeqFieldNumber)
                          : 0;
  }
  const std::string field = FindUnparseableField(fields, xv::v1::WorkerMessage::descriptor(), "");
  if (field.empty()) {
    return Status::InvalidArgument("worker message: " + std::to_string(wire.size()) +
                                   " bytes that do not parse as an xv.v1.WorkerMessage");
  }
  return Status::InvalidArgument("worker message: " + field +
                                 ": not valid UTF-8 (a proto3 string field; trainer text goes in "
                                 "the bytes fields, see proto/xv/v1/workers.proto)");
}

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
  // Code candidates (issue 16): the trainers that run them, and their sources (a patch's base;
  // each text is checked when stored, SourceTable::RecordTrainerSource).
  XV_RETURN_IF_ERROR(CheckListSize("register.capabilities.code_candidate_trainers",
                                   caps->code_candidate_trainers_size(), kMaxRegisterListEntries));
  for (int i = 0; i < caps->code_candidate_trainers_size(); ++i) {
    XV_RETURN_IF_ERROR(
        CheckTextField("register.capabilities.code_candidate_trainers[" + std::to_string(i) + "]",
                       caps->code_candidate_trainers(i), kMaxKindBytes, /*is_name=*/true));
  }
  XV_RETURN_IF_ERROR(CheckListSize("register.trainer_sources", reg->trainer_sources_size(),
                                   kMaxRegisterListEntries));
  for (int i = 0; i < reg->trainer_sources_size(); ++i) {
    XV_RETURN_IF_ERROR(CheckTextField("register.trainer_sources[" + std::to_string(i) + "].trainer",
                                      reg->trainer_sources(i).trainer(), kMaxKindBytes,
                                      /*is_name=*/true));
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
  const bool type_ok = ev->type().size() <= kMaxKindBytes && IsValidUtf8(ev->type());
  const bool json_ok = IsValidUtf8(ev->json());
  if (type_ok && json_ok) return notes;  // nearly every event: no note text is built
  const std::string at = "event " + std::to_string(ev->seq()) + ": ";
  RepairText(at + "type", ev->mutable_type(), kMaxKindBytes, false, &notes);
  if (!json_ok) {
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
