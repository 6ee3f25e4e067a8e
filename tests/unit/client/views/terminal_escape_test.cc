// Text from the daemon printed by xvctl (tables of `results`, `campaign show`, `watch` lines) never
// reaches the terminal with a control character in it: names may hold ESC, BEL, CR or LF (a name
// could retitle or clear the reader's terminal, or forge rows), and are shown escaped.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "client/views/campaign_view.h"
#include "client/views/experiment_view.h"
#include "client/views/text_table.h"
#include "client/views/watch_event_view.h"

namespace xv::client {
namespace {

// ESC ] 0 ; title BEL (retitles an xterm), ESC [ 2 J (clears the screen), CR, LF, and a C1 CSI.
const std::string kHostile = "evil\x1b]0;pwned\x07\x1b[2J\rforged\nrow\xc2\x9b";

// No byte below 0x20 other than '\n' (and '\n' only where `newlines` allows), no DEL, no C1.
void ExpectNoControls(const std::string& printed, bool newlines) {
  for (size_t i = 0; i < printed.size(); ++i) {
    const auto c = static_cast<unsigned char>(printed[i]);
    if (c == '\n' && newlines) continue;
    ASSERT_FALSE(c < 0x20 || c == 0x7f)
        << "byte " << static_cast<int>(c) << " at " << i << " in " << printed;
    if (c == 0xc2 && i + 1 < printed.size()) {
      const auto next = static_cast<unsigned char>(printed[i + 1]);
      ASSERT_FALSE(next >= 0x80 && next <= 0x9f) << "a C1 control at " << i;
    }
  }
}

TEST(TerminalEscape, TableCellsAreEscapedAndRowsStayOneLine) {
  TextTable t({{"name", TextTable::Align::kLeft}, {"n", TextTable::Align::kRight}});
  t.AddRow({kHostile, "1"});
  t.AddRow({"plain", "2"});
  const std::string out = t.Render();
  ExpectNoControls(out, /*newlines=*/true);
  EXPECT_NE(out.find("evil\\x1b]0;pwned\\x07\\x1b[2J\\rforged\\nrow\\u009b"), std::string::npos)
      << out;
  // Header, rule, two rows: the LF in the name did not make a row of its own.
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 4);
}

TEST(TerminalEscape, ResultsTableEscapesNamesKindsAndReasons) {
  v1::Experiment e;
  e.set_id(7);
  e.set_name(kHostile);
  e.set_state("failed");
  e.set_failure_kind("crashed\x1b[31m");
  e.set_decision_reason("because\x07");
  const std::string out = RenderResultsTable({e});
  ExpectNoControls(out, /*newlines=*/true);
  EXPECT_NE(out.find("evil\\x1b]0;pwned"), std::string::npos) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 3) << out;
}

TEST(TerminalEscape, CampaignShowEscapesHeaderLinesAndTables) {
  v1::Campaign c;
  c.set_id(3);
  c.set_name(kHostile);
  c.set_state("active");
  c.set_device_filter("nvidia\x1b[2J");
  c.set_trainer("cmd\r");
  c.set_policy_json(R"({"mode":"welch","note":")" + std::string("\x1b]0;x\x07") + "\"}");
  v1::RoundInfo* r = c.add_rounds();
  r->set_id(1);
  r->set_kind("candidates");
  r->set_state("decided");
  r->set_decision_summary("kept \x1b[2Jall");
  const std::string out = RenderCampaign(c);
  ExpectNoControls(out, /*newlines=*/true);
  EXPECT_NE(out.find("campaign evil\\x1b]0;pwned\\x07\\x1b[2J\\rforged\\nrow\\u009b #3 (active)"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("devices: nvidia\\x1b[2J"), std::string::npos) << out;
  EXPECT_NE(out.find("kept \\x1b[2Jall"), std::string::npos) << out;
}

TEST(TerminalEscape, WatchLinesAreOneEscapedLine) {
  v1::WatchEvent ev;
  ev.set_time("2026-11-30T09:00:11.123Z");
  ev.set_kind("error");
  ev.set_experiment_id(7);
  ev.set_name(kHostile);
  ev.set_campaign("c\x1b[2J");
  ev.set_detail("oom: \x1b]0;t\x07\nTraceback");
  const std::string line = WatchEventLine(ev);
  ExpectNoControls(line, /*newlines=*/false);
  EXPECT_EQ(line,
            "09:00:11.123  #7 evil\\x1b]0;pwned\\x07\\x1b[2J\\rforged\\nrow\\u009b [c\\x1b[2J]  "
            "error: oom: \\x1b]0;t\\x07\\nTraceback");
  // An ordinary event is unchanged.
  v1::WatchEvent step;
  step.set_time("2026-11-30T09:00:12.000Z");
  step.set_kind("state");
  step.set_experiment_id(8);
  step.set_name("matrix_lr=0.02");
  step.set_campaign("lr");
  step.set_state("succeeded");
  EXPECT_EQ(WatchEventLine(step), "09:00:12.000  #8 matrix_lr=0.02 [lr]  succeeded");
}

}  // namespace
}  // namespace xv::client
