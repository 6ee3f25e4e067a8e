// The subcommands of xvctl. Each Add*Command registers one subcommand on `app`; its callback reads
// `options` (owned by main, alive for the whole run) and ends the program with the exit codes of
// client/client_options.h (throwing CLI::RuntimeError for a non-zero code).
#pragma once

#include <CLI/CLI.hpp>

#include "client/client_options.h"
#include "common/status.h"

namespace xv::client {

void AddSubmitCommand(CLI::App* app, const ClientOptions* options);
void AddStatusCommand(CLI::App* app, const ClientOptions* options);
// `workers [--json]`: workers with their probed matmul TFLOP/s and bandwidth.
void AddWorkersCommand(CLI::App* app, const ClientOptions* options);
void AddResultsCommand(CLI::App* app, const ClientOptions* options);
void AddWaitCommand(CLI::App* app, const ClientOptions* options);
// `campaign create|show|list|pause|resume`.
void AddCampaignCommand(CLI::App* app, const ClientOptions* options);
// `decide ROUND --keep EXP|--none --reason TEXT`.
void AddDecideCommand(CLI::App* app, const ClientOptions* options);
// `plan submit FILE|show NAME|ID|list|cancel NAME|ID` (docs/plans.md).
void AddPlanCommand(CLI::App* app, const ClientOptions* options);
// `ablate --campaign X` and `confirm --campaign X --seeds K`: daemon-built rounds.
void AddAblateCommand(CLI::App* app, const ClientOptions* options);
void AddConfirmCommand(CLI::App* app, const ClientOptions* options);
// `watch [--campaign X] [--experiment N] [--until-idle] [--json]`: the daemon's event stream.
void AddWatchCommand(CLI::App* app, const ClientOptions* options);
// `drain WORKER|--all`: the worker finishes its running attempt and exits.
void AddDrainCommand(CLI::App* app, const ClientOptions* options);
// `cancel ID...`: queued, assigned or running experiments end cancelled.
void AddCancelCommand(CLI::App* app, const ClientOptions* options);
// `show ID`: one experiment in full (recipe against the head, figures, events, failure tail).
void AddShowCommand(CLI::App* app, const ClientOptions* options);
// `best [--campaign X]`: the lowest val_bpb run, and the campaign's head.
void AddBestCommand(CLI::App* app, const ClientOptions* options);
// `compare (--round R | --recipe HASH | ID...)`: n, mean, sd and efficiency per group.
void AddCompareCommand(CLI::App* app, const ClientOptions* options);
// `plot --campaign X -o FILE.svg|png`: upstream's progress plot.
void AddPlotCommand(CLI::App* app, const ClientOptions* options);
// `mcp`: the Model Context Protocol server on stdin/stdout for AI agents (docs/agent.md).
void AddMcpCommand(CLI::App* app, const ClientOptions* options);
// token create|list|revoke and audit (client/commands/token_command.cc).
void AddTokenCommand(CLI::App* app, const ClientOptions* options);
void AddAuditCommand(CLI::App* app, const ClientOptions* options);

// Prints "xvctl: <message>" to stderr and returns the exit code for `st` (2 for InvalidArgument).
int ReportError(const Status& st);

// The exit code of a command line CLI11 refused or a command ended: 0 for --help, the command's
// own code for CLI::RuntimeError (thrown by the commands' callbacks), else kExitInvalid (every
// usage error: unknown option, missing argument, a value that does not convert or check) after
// printing CLI11's message and the usage hint to stderr.
int ExitCodeForParseError(const CLI::App& app, const CLI::ParseError& e);

}  // namespace xv::client
