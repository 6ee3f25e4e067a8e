#include "client/numeric_ref.h"

#include <limits>

namespace xv::client {

bool ParseNumericRef(const std::string& ref, int64_t* id) {
  if (ref.empty() || ref.find_first_not_of("0123456789") != std::string::npos) return false;
  int64_t v = 0;
  for (const char c : ref) {
    const int digit = c - '0';
    if (v > (std::numeric_limits<int64_t>::max() - digit) / 10) return false;
    v = v * 10 + digit;
  }
  *id = v;
  return true;
}

}  // namespace xv::client
