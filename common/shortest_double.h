// Shortest round-trip text of a double: the fewest significant digits (1..17) whose strtod gives
// the same bits back. Used by CanonicalJson (stable hashes: 0.1 and 0.10 are the same number) and
// by the recipe docs and messages. Thread-safety: pure function.
#pragma once

#include <string>

namespace xv {

// "0.1", "15.0", "1e-10", "524288.0", "-0.5"; a value with an integral text gets ".0" appended so
// it reads back as a floating-point number. Non-finite values give "nan", "inf" or "-inf".
std::string ShortestDoubleText(double value);

}  // namespace xv
