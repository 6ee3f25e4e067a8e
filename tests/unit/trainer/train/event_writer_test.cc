#include "trainer/events/event_writer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "trainer/train/step_event_throttle.h"

namespace xv::trainer {
namespace {

std::vector<nlohmann::json> ReadLines(std::FILE* f) {
  std::rewind(f);
  std::vector<nlohmann::json> out;
  char buf[4096];
  std::string line;
  while (std::fgets(buf, sizeof(buf), f)) {
    line += buf;
    if (!line.empty() && line.back() == '\n') {
      out.push_back(nlohmann::json::parse(line));
      line.clear();
    }
  }
  EXPECT_TRUE(line.empty()) << "unterminated line: " << line;
  return out;
}

TEST(EventWriter, OneJsonObjectPerLineWithTypeAndTime) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  EventWriter w(f);
  w.Emit("step", {{"step", 3}, {"loss", FiniteOrNull(std::nan(""))}, {"type", "ignored"}});
  w.Emit("summary", {{"val_bpb", 1.25}});
  auto lines = ReadLines(f);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["type"], "step");
  EXPECT_EQ(lines[0]["step"], 3);
  EXPECT_TRUE(lines[0]["loss"].is_null());
  EXPECT_GT(lines[0]["t"].get<double>(), 1.6e9);
  EXPECT_EQ(lines[1]["type"], "summary");
  EXPECT_DOUBLE_EQ(lines[1]["val_bpb"].get<double>(), 1.25);
  EXPECT_EQ(w.count(), 2);
  std::fclose(f);
}

TEST(EventWriter, ConcurrentEmitsNeverInterleave) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  EventWriter w(f);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&w, t] {
      for (int i = 0; i < 200; ++i) w.Emit("step", {{"thread", t}, {"pad", std::string(300, 'x')}});
    });
  }
  for (auto& th : threads) th.join();
  auto lines = ReadLines(f);  // throws on a torn line
  EXPECT_EQ(lines.size(), 800u);
  std::fclose(f);
}

TEST(StepEventThrottle, AtMostOnePerIntervalAlwaysFirstAndLast) {
  StepEventThrottle th(0.25);
  EXPECT_TRUE(th.ShouldEmit(10.0, false));
  EXPECT_FALSE(th.ShouldEmit(10.1, false));
  EXPECT_FALSE(th.ShouldEmit(10.2, false));
  EXPECT_TRUE(th.ShouldEmit(10.26, false));
  EXPECT_TRUE(th.ShouldEmit(10.27, true));  // the last step always
}

}  // namespace
}  // namespace xv::trainer
