// The fuzz targets: each runs one product parser on arbitrary bytes and checks its contract,
// throwing FuzzContractViolation (fuzz_driver.h) when the product breaks it. Signature of
// libFuzzer's LLVMFuzzerTestOneInput; every target returns 0.
// Thread-safety: none; one input at a time (the spool and safetensors targets use a scratch
// directory of their own, created on first use).
#pragma once

#include <cstddef>
#include <cstdint>

namespace xv::fuzz {

// The bytes as recipe YAML (common/recipe.h): ParseRecipeYaml returns a Status (never throws);
// an accepted recipe validates, resolves its sizes and survives the JSON round trip with the same
// canonical hash; a refusal is INVALID_ARGUMENT naming a knob or "recipe". The bytes also go to
// ApplyOverride as "key=value", which leaves the recipe unchanged when it refuses.
int FuzzRecipeYaml(const uint8_t* data, size_t size);

// The bytes as a trainer's stdout (worker/trainer_output_reader.h), one line per '\n'; the first
// byte picks the configured format (xv-events, upstream, auto). Every relayed event is a JSON
// object whose `type` is the event's type; integer fields (step, epoch, num_steps, depth) are
// integers a number could produce.
int FuzzTrainerOutput(const uint8_t* data, size_t size);

// The bytes as upstream train.py output straight into UpstreamOutputParser, '\r' segments
// included: every event is an object with a string type; malformed lines are counted, never fatal.
int FuzzUpstreamOutput(const uint8_t* data, size_t size);

// The bytes (after a first flags byte) as a spool file DIR/exp-7-a1.spool
// (worker/event_spool.h); flag bit 0 rewrites each complete record's CRC so that records reach
// the payload parser. Recover returns ok, cuts the file back to a prefix of what was there, and a
// second Recover of the result finds nothing to drop and the same messages (no loop, no crash).
int FuzzEventSpool(const uint8_t* data, size_t size);

// The bytes as xvctl override flags (client/requests/candidate_spec.h,
// client/requests/sweep_expansion.h, client/requests/comma_list.h): each line as --set and
// --candidate, all lines as --sweep flags. Errors name their flag; an accepted sweep product has
// one override per axis per candidate; accepted overrides then go to ApplyOverrides on the default
// recipe.
int FuzzOverrideLists(const uint8_t* data, size_t size);

// The bytes as a safetensors file (trainer/checkpoint/safetensors.h): LoadSafetensors returns a
// Status (a header lying about offsets, shapes or dtypes is refused, naming the file), and every
// tensor it accepts holds exactly the bytes its entry covers.
int FuzzSafetensors(const uint8_t* data, size_t size);

// --- the daemon's own code and the edges that feed it (daemon_fuzz_test) ---

// The bytes as a campaign's budget_json (daemon/engine/budget_contract.h): a refusal is
// INVALID_ARGUMENT naming the budget in at most 600 bytes (values described, never echoed); an
// accepted contract's stored form reads back as the same contract.
int FuzzBudgetContract(const uint8_t* data, size_t size);

// The bytes as trainer events applied by the store (daemon/store/store.h) to a live
// attempt in a real SQLite database: byte 0 picks the first event's declared type, each line after
// it is one event's JSON. ApplyTrainerEvents succeeds, acknowledges the batch's last seq, and the
// experiment still reads back; every 50 inputs the attempt finishes and another starts.
int FuzzStoreEvents(const uint8_t* data, size_t size);

// The bytes (after three bytes of limits) as a trainer's stderr fed to LineTail in chunks, and as
// its stdout lines fed to TrainerOutputReader: the tail stays within its line count and line size,
// and every relayed event is a JSON object within the daemon's nesting limit.
int FuzzWorkerLines(const uint8_t* data, size_t size);

// The bytes (after a byte picking the tool) as the arguments of an `xvctl mcp` tools/call, through
// McpServer::HandleLine with the real tools over a daemon socket nobody listens on: exactly one
// JSON reply line, never an internal error (a throwing handler), tool errors of at most 2 KiB.
int FuzzMcpArguments(const uint8_t* data, size_t size);

}  // namespace xv::fuzz
