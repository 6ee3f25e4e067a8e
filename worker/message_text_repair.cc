#include "worker/message_text_repair.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/reflection.h>

#include "common/untrusted_text.h"

namespace xv::worker {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

void RepairInto(Message* message, const std::string& prefix, std::vector<std::string>* repaired) {
  const Reflection* refl = message->GetReflection();
  std::vector<const FieldDescriptor*> fields;
  refl->ListFields(*message, &fields);  // set fields only; nesting is bounded by the schema
  for (const FieldDescriptor* f : fields) {
    const std::string path = prefix.empty() ? f->name() : prefix + "." + f->name();
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_STRING) {
      bool fixed = false;
      if (f->is_repeated()) {
        for (int i = 0; i < refl->FieldSize(*message, f); ++i) {
          const std::string& v = refl->GetRepeatedStringReference(*message, f, i, nullptr);
          if (IsValidUtf8(v)) continue;
          refl->SetRepeatedString(message, f, i, SanitizeUtf8(v));
          fixed = true;
        }
      } else {
        std::string scratch;
        const std::string& v = refl->GetStringReference(*message, f, &scratch);
        if (!IsValidUtf8(v)) {
          refl->SetString(message, f, SanitizeUtf8(v));
          fixed = true;
        }
      }
      if (fixed) repaired->push_back(path);
    } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (f->is_repeated()) {
        for (int i = 0; i < refl->FieldSize(*message, f); ++i) {
          RepairInto(refl->MutableRepeatedMessage(message, f, i), path, repaired);
        }
      } else {
        RepairInto(refl->MutableMessage(message, f), path, repaired);
      }
    }
  }
}

}  // namespace

std::vector<std::string> RepairMessageText(google::protobuf::Message* message) {
  std::vector<std::string> repaired;
  RepairInto(message, "", &repaired);
  return repaired;
}

}  // namespace xv::worker
