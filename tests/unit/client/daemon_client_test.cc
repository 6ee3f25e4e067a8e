#include "client/daemon_client.h"

#include <gtest/gtest.h>

#include "client/experiment_listing.h"

namespace xv::client {
namespace {

TEST(DaemonClient, UnreachableDaemonSaysHowToStartIt) {
  ClientOptions opts;
  opts.state_dir = "/tmp/xv-no-such-state-dir";
  DaemonClient client(opts);
  EXPECT_EQ(client.address(), "unix:/tmp/xv-no-such-state-dir/xvd.sock");
  v1::StatusResponse resp;
  Status st = client.GetStatus(&resp);
  EXPECT_EQ(st.code(), Status::Code::kUnavailable);
  EXPECT_EQ(st.message(),
            "cannot reach xvd at unix:/tmp/xv-no-such-state-dir/xvd.sock: is it running? (start "
            "it with: xvd --state-dir /tmp/xv-no-such-state-dir)");
}

TEST(ClientOptions, DaemonFlagWinsOverStateDir) {
  ClientOptions opts;
  opts.state_dir = "/s";
  opts.daemon = "127.0.0.1:7470";
  EXPECT_EQ(opts.DaemonAddress(), "127.0.0.1:7470");
  EXPECT_EQ(opts.StateDir(), "/s");
}

TEST(ApplyFilter, NumericCampaignIsAnIdElseAName) {
  v1::ListExperimentsRequest req;
  ApplyFilter({"12", "running", 0}, &req);
  EXPECT_EQ(req.campaign_id(), 12);
  EXPECT_EQ(req.campaign(), "");
  EXPECT_EQ(req.state(), "running");
  v1::ListExperimentsRequest by_name;
  ApplyFilter({"demo", "", 0}, &by_name);
  EXPECT_EQ(by_name.campaign_id(), 0);
  EXPECT_EQ(by_name.campaign(), "demo");
}

TEST(ListFromDatabase, MissingFileIsAnErrorNamingIt) {
  std::vector<v1::Experiment> out;
  Status st = ListFromDatabase("/tmp/xv-no-such-dir/xv.db", {}, &out);
  EXPECT_FALSE(st.ok());
}

}  // namespace
}  // namespace xv::client
