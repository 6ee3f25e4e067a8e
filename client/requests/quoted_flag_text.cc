#include "client/requests/quoted_flag_text.h"

#include "common/untrusted_text.h"

namespace xv::client {

std::string QuotedFlagText(const std::string& text) {
  if (text.size() <= kMaxQuoteBytes && IsValidUtf8(text) && !HasControlCharacters(text)) {
    return "'" + text + "'";
  }
  return QuoteExcerpt(text);
}

}  // namespace xv::client
