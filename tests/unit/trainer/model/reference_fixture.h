// Shared helpers of the trainer model tests: loading the reference vectors of
// $XV_REFERENCE_DIR (default tests/reference) and comparing tensors by
// max|a-b| / max|b|.
#pragma once

#include <map>
#include <string>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "trainer/verify/verify_command.h"

namespace xv::trainer::testing {

// $XV_REFERENCE_DIR, or the checkout's tests/reference.
std::string ReferenceDir();
// Parses manifest.json (fails the test if missing).
nlohmann::json LoadManifest();
// Loads REFERENCE_DIR/<file> (fails the test if it cannot).
std::map<std::string, torch::Tensor> LoadReferenceTensors(const std::string& file);
// max|a-b| / max|b| (max|a-b| when b is all zeros); infinity on shape mismatch or NaN: the
// measure `xv-train verify` reports.
using xv::trainer::RelativeError;
// Sets LibTorch's intra-op threads to the hardware concurrency (Debian's default is 1).
void UseAllCores();

}  // namespace xv::trainer::testing
