// EvaluateBpb: upstream prepare.py's evaluate_bpb. Over `steps` batches of the validation split:
//   val_bpb = sum of per-token cross-entropy (nats) over target tokens with a byte length > 0
//             / (ln 2 * sum of the raw byte lengths of the target tokens),
// special tokens having byte length 0 (excluded from both sums). Sums are kept on the device in
// fp64 and read once at the end (no host sync per batch). Thread-safety: uses the model; call from
// the training thread.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include <torch/torch.h>

#include "common/status.h"
#include "trainer/model/gpt.h"
#include "trainer/train/batch_source.h"

namespace xv::trainer {

// The val_bpb definition: raw byte length of each token (specials 0). Upstream's evaluate_bpb
// counts each token's decoded text instead (a cut UTF-8 piece decodes to U+FFFD, 3 bytes), never
// fewer bytes, so xv's val_bpb is never below upstream's on the same model (docs/as-built.md).
// Stored with every result; bump it when the definition changes.
inline constexpr const char* kBpbMetricVersion = "bpb-raw-bytes-v2";

struct BpbResult {
  double val_bpb = 0;
  double total_nats = 0;
  int64_t total_bytes = 0;
  int64_t tokens = 0;  // target tokens evaluated (rows * T * steps)
  double seconds = 0;
};

// Number of evaluation batches for `eval_tokens` (upstream: eval_tokens // (B * T)), at least 1.
int64_t EvalSteps(int64_t eval_tokens, int64_t device_batch_size, int64_t sequence_len);

// REQUIRES: token_bytes.size() == the model's vocab size. `autocast_dtype` applies on GPUs only.
// Errors: from the batch source; InvalidArgument when a target id is outside the vocabulary;
// DataLoss when no target token has a byte length (bpb undefined).
Status EvaluateBpb(GPT& model, BatchSource* val_batches, const std::vector<int32_t>& token_bytes,
                   int64_t steps, const torch::Device& device, torch::ScalarType autocast_dtype,
                   BpbResult* out);

// Per-token losses (nats) of inputs x and targets y, both int64 [rows, T]: any tensor of rows * T
// elements (the model's forward with reduction "none").
using PerTokenLoss = std::function<torch::Tensor(const torch::Tensor& x, const torch::Tensor& y)>;

// The same sums over any per-token loss (the GPT overload calls it under no_grad, the model in
// eval mode and autocast). The parity test of the Python `prepare` module feeds both the same
// model outputs through it (tests/unit/python/).
Status EvaluateBpbOfLoss(const PerTokenLoss& per_token_loss, BatchSource* val_batches,
                         const std::vector<int32_t>& token_bytes, int64_t steps,
                         const torch::Device& device, BpbResult* out);

// Row-major [rows, cols] int32 tokens -> (inputs, targets) int64 [rows, cols-1] on `device`.
std::pair<torch::Tensor, torch::Tensor> BatchToTensors(const TokenBatch& batch,
                                                       const torch::Device& device);

}  // namespace xv::trainer
