#include "trainer/eval/bpb_evaluator.h"

#include <chrono>
#include <cmath>

#include "trainer/device/autocast_scope.h"

namespace xv::trainer {

int64_t EvalSteps(int64_t eval_tokens, int64_t device_batch_size, int64_t sequence_len) {
  int64_t per_batch = device_batch_size * sequence_len;
  if (per_batch <= 0) return 1;
  return std::max<int64_t>(1, eval_tokens / per_batch);
}

std::pair<torch::Tensor, torch::Tensor> BatchToTensors(const TokenBatch& batch,
                                                       const torch::Device& device) {
  auto rows = torch::from_blob(const_cast<int32_t*>(batch.tokens.data()), {batch.rows, batch.cols},
                               torch::kInt32)
                  .to(torch::kLong);
  if (device.is_cuda()) rows = rows.pin_memory().to(device, /*non_blocking=*/true);
  auto x = rows.narrow(1, 0, batch.cols - 1).contiguous();
  auto y = rows.narrow(1, 1, batch.cols - 1).contiguous();
  return {x, y};
}

Status EvaluateBpbOfLoss(const PerTokenLoss& per_token_loss, BatchSource* val_batches,
                         const std::vector<int32_t>& token_bytes, int64_t steps,
                         const torch::Device& device, BpbResult* out) {
  auto t0 = std::chrono::steady_clock::now();
  const int64_t vocab = static_cast<int64_t>(token_bytes.size());
  auto bytes_table =
      torch::tensor(std::vector<int64_t>(token_bytes.begin(), token_bytes.end()), torch::kLong)
          .to(device);
  auto total_nats = torch::zeros({}, torch::TensorOptions().dtype(torch::kDouble).device(device));
  auto total_bytes = torch::zeros({}, torch::TensorOptions().dtype(torch::kLong).device(device));
  auto bad_ids = torch::zeros({}, torch::TensorOptions().dtype(torch::kLong).device(device));
  int64_t tokens = 0;
  TokenBatch batch;
  for (int64_t i = 0; i < steps; ++i) {
    XV_RETURN_IF_ERROR(val_batches->Next(&batch));
    auto [x, y] = BatchToTensors(batch, device);
    torch::Tensor loss_flat = per_token_loss(x, y).reshape(-1).to(torch::kDouble);
    auto y_flat = y.view(-1);
    auto in_vocab = (y_flat >= 0) & (y_flat < vocab);
    bad_ids += (~in_vocab & (y_flat != -1)).sum();
    auto nbytes = bytes_table.index({y_flat.clamp(0, vocab - 1)}) * in_vocab.to(torch::kLong);
    auto mask = nbytes > 0;
    total_nats += (loss_flat * mask.to(torch::kDouble)).sum();
    total_bytes += nbytes.sum();
    tokens += y_flat.numel();
  }
  int64_t bad = bad_ids.item<int64_t>();
  if (bad > 0) {
    return Status::InvalidArgument("validation split: " + std::to_string(bad) +
                                   " target ids outside the vocabulary of " +
                                   std::to_string(vocab) + " tokens");
  }
  out->total_nats = total_nats.item<double>();
  out->total_bytes = total_bytes.item<int64_t>();
  out->tokens = tokens;
  if (out->total_bytes <= 0) {
    return Status::DataLoss("validation split: no target token has a byte length (only specials?)");
  }
  out->val_bpb = out->total_nats / (std::log(2.0) * static_cast<double>(out->total_bytes));
  out->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return Status::Ok();
}

Status EvaluateBpb(GPT& model, BatchSource* val_batches, const std::vector<int32_t>& token_bytes,
                   int64_t steps, const torch::Device& device, torch::ScalarType autocast_dtype,
                   BpbResult* out) {
  torch::NoGradGuard no_grad;
  const bool was_training = model->is_training();
  model->eval();
  Status st = EvaluateBpbOfLoss(
      [&](const torch::Tensor& x, const torch::Tensor& y) {
        AutocastScope autocast(device, autocast_dtype);
        return model->forward(x, y, "none");
      },
      val_batches, token_bytes, steps, device, out);
  if (was_training) model->train();
  return st;
}

}  // namespace xv::trainer
