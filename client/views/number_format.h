// Number formatting for xvctl's tables: fixed decimals, thousands separators, durations.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>

namespace xv::client {

// "1.234568" for (1.2345678, 6); "-" for NaN; "inf" / "-inf" for infinities.
std::string FormatFixed(double value, int decimals);
// Rounded to an integer with ',' between thousands: 1234567.8 -> "1,234,568"; "-" for NaN.
std::string FormatThousands(double value);
std::string FormatThousands(int64_t value);
// Seconds as "12.3s", "4m05s", "1h02m".
std::string FormatDuration(double seconds);

}  // namespace xv::client
