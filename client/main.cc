// xvctl: the command-line client of xvd. Subcommands: submit, status, results, wait, campaign,
// decide, prepare, tokenize, mcp (the MCP server for agents) and more (docs/xvctl.md). Exit codes:
// client/client_options.h (one table for every command).
#include <CLI/CLI.hpp>

#include "client/client_options.h"
#include "client/commands/commands.h"
#include "common/logging.h"
#include "common/paths.h"
#include "tokenizer/prepare_command.h"
#include "tokenizer/tokenize_command.h"

int main(int argc, char** argv) {
  xv::SetupLogging("xvctl", "warn");
  xv::client::ClientOptions options;
  CLI::App app{
      "xvctl: submit GPT-training experiments to xvd and read their results.\n"
      "Default daemon: " +
      xv::DefaultDaemonAddress() + " (env XV_DAEMON; XV_STATE_DIR for the state directory)"};
  app.add_option("--daemon", options.daemon,
                 "xvd address: unix:PATH or HOST:PORT (default: the socket of --state-dir)");
  app.add_option("--state-dir", options.state_dir,
                 "xvd's state directory (default: " + xv::DefaultStateDir() + ")");
  app.add_option("--token-file", options.token_file,
                 "file holding the bearer token (first line) sent to xvd (default $XV_TOKEN_FILE, "
                 "else the token in $XV_TOKEN; never the token itself on the command line)");
  app.add_option("--tls-ca", options.tls_ca,
                 "PEM CA of xvd's certificate: TLS to a HOST:PORT --daemon");
  app.add_option("--tls-cert", options.tls_cert,
                 "PEM client certificate, for an xvd started with --tls-client-ca");
  app.add_option("--tls-key", options.tls_key, "PEM private key of --tls-cert");
  // Before any subcommand runs: a token file that cannot be read is a usage error.
  app.parse_complete_callback([&options] {
    xv::Status s = options.LoadToken();
    if (!s.ok()) throw CLI::ValidationError(s.message());
  });
  app.require_subcommand(1);
  app.fallthrough();
  xv::client::AddSubmitCommand(&app, &options);
  xv::client::AddStatusCommand(&app, &options);
  xv::client::AddWorkersCommand(&app, &options);
  xv::client::AddResultsCommand(&app, &options);
  xv::client::AddShowCommand(&app, &options);
  xv::client::AddBestCommand(&app, &options);
  xv::client::AddCompareCommand(&app, &options);
  xv::client::AddPlotCommand(&app, &options);
  xv::client::AddWaitCommand(&app, &options);
  xv::client::AddCampaignCommand(&app, &options);
  xv::client::AddDecideCommand(&app, &options);
  xv::client::AddAblateCommand(&app, &options);
  xv::client::AddConfirmCommand(&app, &options);
  xv::client::AddPlanCommand(&app, &options);
  xv::client::AddWatchCommand(&app, &options);
  xv::client::AddDrainCommand(&app, &options);
  xv::client::AddCancelCommand(&app, &options);
  xv::client::AddMcpCommand(&app, &options);
  xv::client::AddTokenCommand(&app, &options);
  xv::client::AddAuditCommand(&app, &options);
  xv::tok::AddPrepareCommand(&app);
  xv::tok::AddTokenizeCommand(&app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return xv::client::ExitCodeForParseError(app, e);
  }
  return xv::client::kExitOk;
}
