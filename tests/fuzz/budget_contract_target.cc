// Fuzz target: the daemon's parser of a campaign's budget contract
// (daemon/engine/budget_contract.h), which reads CreateCampaign's budget_json as a caller sent it.
#include <cstdint>
#include <string>

#include "daemon/engine/budget_contract.h"
#include "fuzz_driver.h"
#include "fuzz_targets.h"

namespace xv::fuzz {

int FuzzBudgetContract(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  daemon::BudgetContract contract;
  const Status st = daemon::ParseBudgetContract(text, &contract);
  if (!st.ok()) {
    XV_FUZZ_CHECK(st.code() == Status::Code::kInvalidArgument,
                  "a refusal that is not INVALID_ARGUMENT: " + st.ToString());
    XV_FUZZ_CHECK(st.message().rfind("budget", 0) == 0,
                  "a refusal that does not name the budget: " + st.message());
    // Described or quoted, never echoed whole: a short message whatever the input's size.
    XV_FUZZ_CHECK(st.message().size() <= 600,
                  "a refusal of " + std::to_string(st.message().size()) + " bytes");
    return 0;
  }
  // Accepted: the stored form reads back as the same contract.
  daemon::BudgetContract again;
  const std::string stored = daemon::BudgetContractToJson(contract);
  const Status back = daemon::ParseBudgetContract(stored, &again);
  XV_FUZZ_CHECK(back.ok(), "the stored form " + stored + " is refused: " + back.message());
  XV_FUZZ_CHECK(again.time_budget_s == contract.time_budget_s &&
                    again.startup_allowance_s == contract.startup_allowance_s &&
                    again.eval_allowance_s == contract.eval_allowance_s &&
                    again.max_concurrent == contract.max_concurrent,
                "the stored form " + stored + " reads back as another contract");
  return 0;
}

}  // namespace xv::fuzz
