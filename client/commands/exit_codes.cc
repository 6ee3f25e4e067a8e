// The exit codes of every xvctl command in one place (client/client_options.h lists them): a
// failed Status becomes 1 or 2, a command line CLI11 refuses becomes 2.
#include <iostream>

#include "client/commands/commands.h"
#include "common/untrusted_text.h"

namespace xv::client {

int ReportError(const Status& st) {
  // The message may quote text from the daemon or a file: control characters are shown escaped.
  std::cerr << "xvctl: " << EscapeForTerminal(st.message(), /*keep_newlines_and_tabs=*/true)
            << std::endl;
  return st.code() == Status::Code::kInvalidArgument ? kExitInvalid : kExitError;
}

int ExitCodeForParseError(const CLI::App& app, const CLI::ParseError& e) {
  // CLI11 prints help and versions, and stays quiet for a command's own RuntimeError.
  const int cli11_code = app.exit(e);
  if (dynamic_cast<const CLI::RuntimeError*>(&e) != nullptr) return cli11_code;
  if (dynamic_cast<const CLI::Success*>(&e) != nullptr ||
      dynamic_cast<const CLI::CallForHelp*>(&e) != nullptr ||
      dynamic_cast<const CLI::CallForAllHelp*>(&e) != nullptr ||
      dynamic_cast<const CLI::CallForVersion*>(&e) != nullptr) {
    return kExitOk;
  }
  return kExitInvalid;
}

}  // namespace xv::client
