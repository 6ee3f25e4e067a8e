// A campaign or plan given as NAME|ID: an all-digit reference that fits in int64 is an id; any
// other text (a name, or digits too long for an id) is a name. Thread-safety: pure function.
#pragma once

#include <cstdint>
#include <string>

namespace xv::client {

// True, with *id set, when `ref` is 1..18 decimal digits or a longer run that still fits in int64;
// false for "", for anything with another character, and for digits beyond int64 (never throws,
// unlike std::stoll).
bool ParseNumericRef(const std::string& ref, int64_t* id);

}  // namespace xv::client
