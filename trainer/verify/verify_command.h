// `xv-train verify`: checks a device/LibTorch stack's numerics against upstream reference cases.
//
//   xv-train verify --case CASE.safetensors --config CASE.json --out OUT.safetensors
//                   [--device cpu|cuda] [--attention auto|flash|sdpa|math]
//                   [--precision fp32|fp64] [--against REF.safetensors]
//   xv-train verify --against REF.safetensors --out OUT.safetensors
//   xv-train verify --builtin [--device cpu|cuda]   (the cases shipped in trainer/verify/cases/)
//
// With --case: loads param/<name>, input/idx, input/targets, runs forward (logits, loss,
// loss_none), backward (grad/<name>), two MuonAdamW steps with the case's optimizer_kwargs
// (step1/<name>, output/loss_after_step1, step2/<name>) and writes them in fp32 to --out. With
// --against: prints the worst relative error max|a-b|/max|b| per tensor family, its tolerance and
// PASS/FAIL, and beside it the reference's own rounding floor: the same family's error of this
// case computed in fp64 on the CPU (the fp32 reference's function, exactly). A stack whose error
// sits at the floor differs from the reference no more than exact arithmetic does.
// Step 1 runs twice: end to end (step1/*, from this run's gradients) and teacher-forced
// (teacher_forced/step1/*, from the case's own grad/*), so Muon's orthogonalisation is checked on
// the reference's exact input; the comparison prints both as families "step1/muon" and
// "step1/muon teacher-forced" (5e-3: the GEMM's own floor, see TeacherForcedTolerance).
// --precision fp64 runs the whole case in fp64 (with fp32's RMSNorm epsilon, so it computes the
// fp32 model's function; Muon's orthogonalisation stays in bf16 as upstream). Exit codes: 0 = pass
// (or outputs written), 1 = a comparison failed, 2 = bad arguments or input.
#pragma once

#include <map>
#include <string>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "common/status.h"

namespace xv::trainer {

// argv after "verify" (argv[0] is ignored, as a program name). Prints to stdout/stderr.
int RunVerifyCommand(int argc, char** argv);

struct VerifyRunOptions {
  std::string device = "cpu";              // cpu | cuda
  std::string attention_backend = "auto";  // auto | flash | sdpa | math
  std::string precision = "fp32";          // fp32 | fp64 (see the file comment)
  // Step 2 from this run's step-1 parameters even when the case has step1/* (by default step 2
  // starts from the case's own step-1 parameters, so each step is checked on its own).
  bool free_running = false;
};

// Prefix of the teacher-forced step-1 outputs (teacher_forced/step1/<name>).
inline constexpr const char* kTeacherForcedPrefix = "teacher_forced/";

// Runs a case: `case_tensors` holds param/*, input/idx, input/targets (and grad/* for the
// teacher-forced step); `case_config` holds "config" and "optimizer_kwargs". Fills `out` with
// output/*, grad/*, step1/*, step2/* and, when the case has grad/*, teacher_forced/step1/* (fp32,
// CPU).
xv::Status RunVerifyCase(const std::map<std::string, torch::Tensor>& case_tensors,
                         const nlohmann::json& case_config, const VerifyRunOptions& options,
                         std::map<std::string, torch::Tensor>* out);

// Worst relative error max|a-b|/max|b| of `actual` against `expected`; infinity for a missing
// tensor, a shape mismatch or NaN.
double RelativeError(const torch::Tensor& actual, const torch::Tensor& expected);

struct FamilyComparison {
  std::string family;      // "output/logits", "grad", "step1/muon", "step1/adamw", ...
  double worst = 0;        // worst relative error in the family
  std::string worst_name;  // the tensor that has it
  double tolerance = 0;
  bool pass = false;
  double floor = -1;  // the reference's own rounding floor for the family (-1: not computed)
};

// Compares every tensor of `reference` with `actual` (a missing tensor or a shape mismatch fails
// its family). Families and tolerances: output/logits, output/loss, output/loss_none 1e-5; grad
// 1e-4; step1|step2 of transformer.h.* (Muon) 1e-2, other step1|step2 5e-5; output/loss_after_step1
// 1e-5. When `actual` has teacher_forced/* tensors, each reference step1/<name> is also compared
// with teacher_forced/step1/<name> in families "step1/muon teacher-forced" (5e-3) and
// "step1/adamw teacher-forced" (1e-5).
// `exact`, when given, is the case computed with precision fp64: each family's `floor` is its worst
// error against `reference` (information only; PASS/FAIL uses the fixed tolerances).
std::vector<FamilyComparison> CompareAgainstReference(
    const std::map<std::string, torch::Tensor>& actual,
    const std::map<std::string, torch::Tensor>& reference,
    const std::map<std::string, torch::Tensor>* exact = nullptr);

}  // namespace xv::trainer
