#include "daemon/sched/step_work_knobs.h"

#include <algorithm>

namespace xv::sched {

const std::vector<std::string>& StepWorkKnobs() {
  static const std::vector<std::string>* const kKnobs =
      new std::vector<std::string>{"depth",
                                   "aspect_ratio",
                                   "head_dim",
                                   "n_kv_head",
                                   "kv_head_divisor",
                                   "window_pattern",
                                   "short_window_fraction",
                                   "mlp_ratio",
                                   "activation",
                                   "value_embeddings",
                                   "vocab_size",
                                   "total_batch_size",
                                   "device_batch_size",
                                   "sequence_len",
                                   "train_sequence_len",
                                   "muon_ns_steps",
                                   "dtype",
                                   "attention_backend",
                                   "device",
                                   "threads"};
  return *kKnobs;
}

bool IsStepWorkKnob(const std::string& knob) {
  const std::vector<std::string>& knobs = StepWorkKnobs();
  return std::find(knobs.begin(), knobs.end(), knob) != knobs.end();
}

}  // namespace xv::sched
