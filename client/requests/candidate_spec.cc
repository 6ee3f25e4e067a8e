#include "client/requests/candidate_spec.h"

#include "client/requests/comma_list.h"
#include "client/requests/quoted_flag_text.h"
#include "common/message_field_name.h"

namespace xv::client {

Status ParseOverride(const std::string& text, const std::string& what, v1::Override* out) {
  size_t eq = text.find('=');
  if (eq == std::string::npos) {
    return Status::InvalidArgument(what + " " + QuotedFlagText(text) + ": expected key=value");
  }
  std::string key = TrimBlanks(text.substr(0, eq));
  std::string value = TrimBlanks(text.substr(eq + 1));
  if (key.empty())
    return Status::InvalidArgument(what + " " + QuotedFlagText(text) + ": empty key");
  if (value.empty()) {
    return Status::InvalidArgument(what + " " + QuotedFlagText(text) + ": empty value for " +
                                   FieldNameForMessage(key));
  }
  out->set_key(key);
  out->set_value(value);
  return Status::Ok();
}

Status ParseCandidate(const std::string& text, std::vector<v1::Override>* out) {
  out->clear();
  std::vector<std::string> parts;
  Status split = SplitCommaList(text, &parts);
  if (!split.ok()) return split.WithContext("--candidate " + QuotedFlagText(text) + ": ");
  for (const auto& p : parts) {
    if (p.empty()) continue;
    v1::Override o;
    XV_RETURN_IF_ERROR(ParseOverride(p, "--candidate", &o));
    out->push_back(o);
  }
  if (out->empty()) {
    return Status::InvalidArgument("--candidate " + QuotedFlagText(text) + ": no overrides");
  }
  return Status::Ok();
}

}  // namespace xv::client
