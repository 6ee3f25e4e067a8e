#include "common/message_field_name.h"

#include "common/untrusted_text.h"

namespace xv {

std::string FieldNameForMessage(std::string_view key) {
  if (key.size() <= kMaxFieldNameBytes && IsValidUtf8(key) && !HasControlCharacters(key)) {
    return std::string(key);
  }
  return QuoteExcerpt(key, kMaxFieldNameBytes);
}

}  // namespace xv
