// EventSpool::Recover and the names of the files in its directory: a name that matches the spool
// pattern but holds a number out of range is ignored with a warning (std::stoll threw out of
// Recover before, so such a file stopped every worker start; found while writing tests/fuzz).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>

#include "tests/unit/worker/outbox_test_fixtures.h"
#include "worker/event_spool.h"

namespace xv::worker {
namespace {

TEST(EventSpoolNames, OutOfRangeNumbersInAFileNameAreIgnoredWithAWarning) {
  testing::ScratchDir scratch("spool-names");
  const std::string dir = scratch.path().string();
  {
    std::unique_ptr<EventSpool> spool;
    ASSERT_TRUE(EventSpool::Open(dir, &spool).ok());
    ASSERT_TRUE(spool->Append(testing::StepEvent(7, 1, 1)).ok());
  }
  for (const std::string name : {"exp-99999999999999999999-a1.spool", "exp-7-a99999999999.spool"}) {
    std::ofstream(dir + "/" + name) << "XVSPOOL1";
  }
  std::unique_ptr<EventSpool> spool;
  ASSERT_TRUE(EventSpool::Open(dir, &spool).ok());
  std::vector<SpooledAttempt> attempts;
  std::vector<std::string> warnings;
  Status st;
  ASSERT_NO_THROW(st = spool->Recover(&attempts, &warnings));
  ASSERT_TRUE(st.ok()) << st.ToString();
  // The real attempt is recovered; the two odd files are named in warnings and left where they are.
  ASSERT_EQ(attempts.size(), 1u);
  EXPECT_EQ(attempts[0].experiment_id, 7);
  ASSERT_EQ(warnings.size(), 2u);
  for (const auto& w : warnings) {
    EXPECT_NE(w.find("number out of range; ignored"), std::string::npos) << w;
  }
  EXPECT_TRUE(std::filesystem::exists(dir + "/exp-99999999999999999999-a1.spool"));
}

}  // namespace
}  // namespace xv::worker
