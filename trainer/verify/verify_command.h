// `xv-train verify`: checks a device/LibTorch stack's numerics against upstream reference cases.
//
//   xv-train verify --case CASE.safetensors --config CASE.json --out OUT.safetensors
//                   [--device cpu|cuda] [--attention auto|flash|sdpa|math] [--against
//                   REF.safetensors]
//   xv-train verify --against REF.safetensors --out OUT.safetensors
//   xv-train verify --builtin [--device cpu|cuda]   (the cases shipped in trainer/verify/cases/)
//
// With --case: loads param/<name>, input/idx, input/targets, runs forward (logits, loss,
// loss_none), backward (grad/<name>), two MuonAdamW steps with the case's optimizer_kwargs
// (step1/<name>, output/loss_after_step1, step2/<name>) and writes them in fp32 to --out. With
// --against: prints the worst relative error max|a-b|/max|b| per tensor family, its tolerance and
// PASS/FAIL. Exit codes: 0 = pass (or outputs written), 1 = a comparison failed, 2 = bad arguments
// or input.
#pragma once

#include <map>
#include <string>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "common/status.h"

namespace xv::trainer {

// argv after "verify" (argv[0] is ignored, as a program name). Prints to stdout/stderr.
int RunVerifyCommand(int argc, char** argv);

// Runs a case: `case_tensors` holds param/*, input/idx, input/targets; `case_config` holds "config"
// and "optimizer_kwargs". Fills `out` with output/*, grad/*, step1/*, step2/* (fp32, CPU).
xv::Status RunVerifyCase(const std::map<std::string, torch::Tensor>& case_tensors,
                         const nlohmann::json& case_config, const std::string& device,
                         const std::string& attention_backend, bool free_running,
                         std::map<std::string, torch::Tensor>* out);

struct FamilyComparison {
  std::string family;      // "output/logits", "grad", "step1/muon", "step1/adamw", ...
  double worst = 0;        // worst relative error in the family
  std::string worst_name;  // the tensor that has it
  double tolerance = 0;
  bool pass = false;
};

// Compares every tensor of `reference` with `actual` (a missing tensor or a shape mismatch fails
// its family). Families and tolerances: output/logits, output/loss, output/loss_none 1e-5; grad
// 1e-4; step1|step2 of transformer.h.* (Muon) 1e-2, other step1|step2 1e-5; output/loss_after_step1
// 1e-3.
std::vector<FamilyComparison> CompareAgainstReference(
    const std::map<std::string, torch::Tensor>& actual,
    const std::map<std::string, torch::Tensor>& reference);

}  // namespace xv::trainer
