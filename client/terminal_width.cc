#include "client/terminal_width.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace xv::client {

size_t TerminalColumns() {
  if (const char* env = std::getenv("COLUMNS"); env != nullptr && *env != '\0') {
    char* end = nullptr;
    const long n = std::strtol(env, &end, 10);
    if (end != nullptr && *end == '\0' && n > 0 && n < 100000) return static_cast<size_t>(n);
  }
  struct winsize ws {};
  if (::isatty(STDOUT_FILENO) && ::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) {
    return ws.ws_col;
  }
  return kDefaultTableWidth;
}

}  // namespace xv::client
