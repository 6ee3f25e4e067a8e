// Tests of --listen (and --http) parsing and its loopback-only policy.
#include <gtest/gtest.h>

#include "daemon/api/listen_address.h"

namespace xv::daemon {
namespace {

TEST(ListenAddress, LoopbackAndNone) {
  ListenAddress a;
  ASSERT_TRUE(ParseListenAddress("127.0.0.1:7470", &a).ok());
  EXPECT_TRUE(a.enabled);
  EXPECT_EQ(a.host, "127.0.0.1");
  EXPECT_EQ(a.port, 7470);
  ASSERT_TRUE(ParseListenAddress("127.0.0.1:0", &a).ok());
  EXPECT_EQ(a.port, 0);
  ASSERT_TRUE(ParseListenAddress("[::1]:9", &a).ok());
  EXPECT_EQ(a.host, "[::1]");
  ASSERT_TRUE(ParseListenAddress("none", &a).ok());
  EXPECT_FALSE(a.enabled);
}

TEST(ListenAddress, NonLoopbackAndMalformedAreRefusedNamingTheFlag) {
  ListenAddress a;
  for (const char* bad : {"0.0.0.0:7470", "10.1.2.3:80", "example.com:1", "127.0.0.1", ":80",
                          "127.0.0.1:x", "127.0.0.1:70000"}) {
    Status s = ParseListenAddress(bad, &a);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("--listen"), std::string::npos) << s.message();
  }
  Status s = ParseListenAddress("0.0.0.0:7470", &a);
  EXPECT_NE(s.message().find("loopback"), std::string::npos) << s.message();
}

// The dashboard's --http: the same loopback rule, errors naming --http; its default follows
// --listen.
TEST(ListenAddress, HttpFlagAndItsDefault) {
  ListenAddress a;
  Status s = ParseListenAddress("0.0.0.0:8470", "--http", &a);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s.message().rfind("--http 0.0.0.0:8470: only loopback", 0), 0u) << s.message();
  ASSERT_TRUE(ParseListenAddress("localhost:0", "--http", &a).ok());
  EXPECT_TRUE(a.enabled);
  EXPECT_EQ(DefaultHttpAddress("127.0.0.1:7470"), "127.0.0.1:8470");
  EXPECT_EQ(DefaultHttpAddress("[::1]:7000"), "[::1]:8470");
  EXPECT_EQ(DefaultHttpAddress("127.0.0.1:0"), "127.0.0.1:0");
  EXPECT_EQ(DefaultHttpAddress("none"), "off");
  // A non-loopback --listen (with TLS) keeps the dashboard on loopback.
  EXPECT_EQ(DefaultHttpAddress("0.0.0.0:7470"), "127.0.0.1:8470");
  EXPECT_EQ(DefaultHttpAddress("10.1.2.3:0"), "127.0.0.1:0");
}

// --listen with TLS may be any host; without TLS a non-loopback host is refused naming the TLS
// flags (issue 15).
TEST(ListenAddress, NonLoopbackListenNeedsTheTlsFlags) {
  ListenAddress a;
  Status s = ParseTcpListenAddress("0.0.0.0:7470", /*tls=*/false, &a);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s.message().rfind("--listen 0.0.0.0:7470: only loopback", 0), 0u) << s.message();
  EXPECT_NE(s.message().find("--tls-cert FILE and --tls-key FILE"), std::string::npos)
      << s.message();
  ASSERT_TRUE(ParseTcpListenAddress("0.0.0.0:7470", /*tls=*/true, &a).ok());
  EXPECT_TRUE(a.enabled);
  EXPECT_FALSE(a.loopback);
  EXPECT_EQ(a.host, "0.0.0.0");
  ASSERT_TRUE(ParseTcpListenAddress("127.0.0.1:0", /*tls=*/false, &a).ok());
  EXPECT_TRUE(a.loopback);
  EXPECT_EQ(ParseTcpListenAddress("10.0.0.1:x", /*tls=*/true, &a).code(),
            Status::Code::kInvalidArgument);
  // The two-argument form is the no-TLS rule.
  EXPECT_EQ(ParseListenAddress("0.0.0.0:7470", &a).code(), Status::Code::kInvalidArgument);
}

}  // namespace
}  // namespace xv::daemon
