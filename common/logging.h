// Logging setup shared by every xv program: spdlog to stderr, "[time] [program] [level] message".
// Call once at the start of main, before any thread starts.
#pragma once

#include <string>

namespace xv {

// level: trace | debug | info | warn | error | off (unknown values fall back to info). The env
// variable XV_LOG_LEVEL, when set, overrides `level`.
void SetupLogging(const std::string& program_name, const std::string& level = "info");

}  // namespace xv
