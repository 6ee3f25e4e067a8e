#include "common/logging.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdlib>

namespace xv {

void SetupLogging(const std::string& program_name, const std::string& level) {
  std::string chosen = level;
  if (const char* env = std::getenv("XV_LOG_LEVEL"); env != nullptr && *env != '\0') chosen = env;
  auto logger = spdlog::stderr_logger_mt(program_name);
  spdlog::set_default_logger(logger);
  spdlog::set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%n] [%l] %v");
  spdlog::level::level_enum lvl = spdlog::level::from_str(chosen);
  if (lvl == spdlog::level::off && chosen != "off") lvl = spdlog::level::info;
  spdlog::set_level(lvl);
  spdlog::flush_on(spdlog::level::info);
}

}  // namespace xv
