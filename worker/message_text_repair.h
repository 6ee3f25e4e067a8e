// Text repair for the protocol messages a worker sends: the last line of defence that makes every
// message the daemon receives parseable. A proto3 `string` field must hold valid UTF-8 (a receiver
// refuses the whole message otherwise), and much of what a worker sends comes from its trainer or
// the machine (stderr, event lines, probe output, device names, environment knobs). The trainer
// text fields are `bytes` on the wire (proto/xv/v1/workers.proto) and are repaired too, so the
// daemon stores them as sent. Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include <google/protobuf/message.h>

namespace xv::worker {

// Replaces every ill-formed UTF-8 sequence by U+FFFD in every string and bytes field of `message`,
// nested messages, repeated fields and map entries included. Valid text is left unchanged. Returns
// the paths of the fields it repaired ("finished.stderr_tail", "register.device.env_knobs.value"),
// for a warning; empty when the message was clean.
std::vector<std::string> RepairMessageText(google::protobuf::Message* message);

}  // namespace xv::worker
