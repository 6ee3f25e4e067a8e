// How xvctl shows one event of the daemon's Watch stream: as JSON (`watch --json`, one object per
// line, and the events of the experiment tool of `xvctl mcp`) and as the human line of `watch`.
// Thread-safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "xv/v1/experiments.pb.h"

namespace xv::client {

// cursor, time, kind, campaign, campaign_id, round_id, experiment_id, attempt, name, and as they
// apply: state, detail, dropped (kind dropped), step (step, eval, nan), loss and tok_per_sec
// (step), val_bpb (summary, eval), event (the stored event JSON, parsed: a trainer event verbatim).
nlohmann::json WatchEventJson(const v1::WatchEvent& ev);

// The line `xvctl watch` prints: "09:00:11.123  #7 name [campaign]  state: detail" (a round's
// events name the round). Text from the daemon is escaped for the terminal (EscapeForTerminal): an
// ESC, BEL, CR or LF in a name or detail is shown as \x1b, \x07, \r, \n, so one event is one line.
std::string WatchEventLine(const v1::WatchEvent& ev);

}  // namespace xv::client
