// common/run_states.h against itself (round trips, unknown names refused) and against the SQL edge:
// the CHECK constraints of migrations/*.sql name exactly the enums' names.
#include "common/run_states.h"

#include <cstdlib>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

namespace xv {
namespace {

// Every name of enum E, in value order, from ToString until it answers "".
template <typename E>
std::vector<std::string> AllNames() {
  std::vector<std::string> names;
  for (int i = 0;; ++i) {
    std::string_view name = ToString(static_cast<E>(i));
    if (name.empty()) break;
    names.emplace_back(name);
  }
  return names;
}

// Each name parses back to its value; near misses do not parse.
template <typename E>
void ExpectRoundTrips(bool (*parse)(std::string_view, E*), int expected_count) {
  std::vector<std::string> names = AllNames<E>();
  ASSERT_EQ(static_cast<int>(names.size()), expected_count);
  for (int i = 0; i < expected_count; ++i) {
    E parsed{};
    ASSERT_TRUE(parse(names[i], &parsed)) << names[i];
    EXPECT_EQ(static_cast<int>(parsed), i) << names[i];
    EXPECT_FALSE(parse(names[i] + " ", &parsed)) << names[i];
    std::string upper = names[i];
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    EXPECT_FALSE(parse(upper, &parsed)) << upper;
  }
  E parsed{};
  EXPECT_FALSE(parse("", &parsed));
  EXPECT_FALSE(parse(std::string_view("queued\0", 7), &parsed));
}

TEST(RunStatesTest, EveryNameRoundTrips) {
  ExpectRoundTrips<ExperimentState>(ParseExperimentState, 10);
  ExpectRoundTrips<RoundKind>(ParseRoundKind, 5);
  ExpectRoundTrips<RoundState>(ParseRoundState, 3);
  ExpectRoundTrips<CampaignState>(ParseCampaignState, 3);
  ExpectRoundTrips<RunRole>(ParseRunRole, 2);
  ExpectRoundTrips<KeepRule>(ParseKeepRule, 2);
  ExpectRoundTrips<Decision>(ParseDecision, 3);
  ExpectRoundTrips<PlanState>(ParsePlanState, 5);
  ExpectRoundTrips<WorkerState>(ParseWorkerState, 4);
}

TEST(RunStatesTest, TerminalActiveAndFinishedPartitionTheStates) {
  std::set<std::string> terminal, active, finished;
  for (int i = 0; i < 10; ++i) {
    auto s = static_cast<ExperimentState>(i);
    if (IsTerminal(s)) terminal.insert(std::string(ToString(s)));
    if (IsActive(s)) active.insert(std::string(ToString(s)));
    if (IsFinishedRun(s)) finished.insert(std::string(ToString(s)));
    EXPECT_FALSE(IsTerminal(s) && IsActive(s)) << ToString(s);
  }
  EXPECT_EQ(terminal, (std::set<std::string>{"succeeded", "diverged", "failed", "invalid",
                                             "cancelled", "timed_out", "lost"}));
  EXPECT_EQ(active, (std::set<std::string>{"assigned", "running"}));
  EXPECT_EQ(finished, (std::set<std::string>{"succeeded", "diverged"}));
}

std::string MigrationsText() {
  const char* dir = std::getenv("XV_SOURCE_DIR");
  std::string source = dir ? dir : ".";
  std::string text;
  for (const char* file : {"0001_initial.sql", "0002_campaign_rounds.sql", "0003_plans.sql"}) {
    std::ifstream in(source + "/migrations/" + file);
    EXPECT_TRUE(in.good()) << source << "/migrations/" << file;
    std::stringstream buffer;
    buffer << in.rdbuf();
    text += buffer.str();
  }
  return text;
}

// The names inside `CHECK (<column> IN ('a', 'b', ...))` for the first constraint on `column`
// that follows `anchor` in the migrations.
std::set<std::string> CheckedNames(const std::string& sql, const std::string& anchor,
                                   const std::string& column) {
  size_t from = sql.find(anchor);
  EXPECT_NE(from, std::string::npos) << anchor;
  if (from == std::string::npos) return {};
  std::regex check("CHECK \\(" + column + " IN \\(([^)]*)\\)\\)");
  std::smatch match;
  std::string rest = sql.substr(from);
  EXPECT_TRUE(std::regex_search(rest, match, check)) << column << " after " << anchor;
  std::set<std::string> names;
  std::regex quoted("'([^']*)'");
  std::string list = match[1].str();
  for (std::sregex_iterator it(list.begin(), list.end(), quoted), end; it != end; ++it) {
    names.insert((*it)[1].str());
  }
  return names;
}

template <typename E>
std::set<std::string> NameSet() {
  std::vector<std::string> names = AllNames<E>();
  return {names.begin(), names.end()};
}

TEST(RunStatesTest, NamesAreTheOnesTheMigrationsCheck) {
  std::string sql = MigrationsText();
  EXPECT_EQ(CheckedNames(sql, "CREATE TABLE experiments", "state"), NameSet<ExperimentState>());
  EXPECT_EQ(CheckedNames(sql, "CREATE TABLE experiments", "decision"), NameSet<Decision>());
  EXPECT_EQ(CheckedNames(sql, "CREATE TABLE rounds", "kind"), NameSet<RoundKind>());
  EXPECT_EQ(CheckedNames(sql, "CREATE TABLE rounds", "state"), NameSet<RoundState>());
  EXPECT_EQ(CheckedNames(sql, "CREATE TABLE campaigns", "state"), NameSet<CampaignState>());
  EXPECT_EQ(CheckedNames(sql, "CREATE TABLE workers", "state"), NameSet<WorkerState>());
  EXPECT_EQ(CheckedNames(sql, "CREATE TABLE plans", "state"), NameSet<PlanState>());
  EXPECT_EQ(CheckedNames(sql, "role", "role"), NameSet<RunRole>());
  EXPECT_EQ(CheckedNames(sql, "keep_rule", "keep_rule"), NameSet<KeepRule>());
}

}  // namespace
}  // namespace xv
