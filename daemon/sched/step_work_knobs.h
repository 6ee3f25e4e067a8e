// Step-work knobs: the recipe knobs that change how much work one training step is, by design
// (issue 14). A candidate that changes one of them runs at another tok/s on purpose: under the
// fixed time budget it gets another number of steps, and that counts for or against it
// (docs/agent.md § The rules). The drift guard therefore does not compare its throughput with the
// controls' (only the controls' own drift within the round), its reason says that the difference
// includes speed, and the throughput-adjusted estimate leaves its runs as measured. This is the one
// list. Thread-safety: constant data; pure functions.
#pragma once

#include <string>
#include <vector>

namespace xv::sched {

// The knobs, in recipe-table order: depth, aspect_ratio, head_dim, n_kv_head, kv_head_divisor,
// window_pattern, short_window_fraction, mlp_ratio, activation, value_embeddings, vocab_size,
// total_batch_size, device_batch_size, sequence_len, train_sequence_len, muon_ns_steps, dtype,
// attention_backend, device, threads.
const std::vector<std::string>& StepWorkKnobs();

// True when `knob` is one of them.
bool IsStepWorkKnob(const std::string& knob);

}  // namespace xv::sched
