// The table of API field limits (daemon/api/request_limits.h): every string field of every request
// of the client services has a row, every row is enforced with an error that starts with the
// field's path and quotes at most a short excerpt, enum-like fields refuse unknown words, and
// docs/agent.md prints the same table; replies without paging fields are trimmed under the list
// cap (daemon/api/reply_caps.h).
#include "daemon/api/request_limits.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include "daemon/api/grpc_status.h"
#include "daemon/api/reply_caps.h"
#include "xv/v1/experiments.pb.h"

namespace xv::daemon {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::DescriptorPool;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::MessageFactory;

constexpr const char* kServices[] = {"xv.v1.Experiments", "xv.v1.Campaigns", "xv.v1.Plans"};

// The request messages of the client services.
std::set<const Descriptor*> RequestMessages() {
  std::set<const Descriptor*> out;
  for (const char* name : kServices) {
    const auto* service = DescriptorPool::generated_pool()->FindServiceByName(name);
    EXPECT_NE(service, nullptr) << name;
    if (service == nullptr) continue;
    for (int i = 0; i < service->method_count(); ++i) out.insert(service->method(i)->input_type());
  }
  return out;
}

// Every string field path ("candidates[].overrides[].key") of `d`.
void StringFieldPatterns(const Descriptor* d, const std::string& prefix,
                         std::vector<std::string>* out) {
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    const std::string path = prefix + f->name() + (f->is_repeated() ? "[]" : "");
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_STRING) out->push_back(path);
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      StringFieldPatterns(f->message_type(), path + ".", out);
    }
  }
}

// A request of type `request` whose field `pattern` (repeated parts at index 0) holds `value`.
// *path receives the concrete path ("candidates[0].name").
std::unique_ptr<Message> RequestWithField(const std::string& request, const std::string& pattern,
                                          const std::string& value, std::string* path) {
  const Descriptor* d = DescriptorPool::generated_pool()->FindMessageTypeByName("xv.v1." + request);
  EXPECT_NE(d, nullptr) << request;
  std::unique_ptr<Message> root(MessageFactory::generated_factory()->GetPrototype(d)->New());
  Message* m = root.get();
  path->clear();
  std::stringstream parts(pattern);
  std::string part;
  std::vector<std::string> names;
  while (std::getline(parts, part, '.')) names.push_back(part);
  for (size_t i = 0; i < names.size(); ++i) {
    const bool repeated = names[i].size() > 2 && names[i].substr(names[i].size() - 2) == "[]";
    const std::string name = repeated ? names[i].substr(0, names[i].size() - 2) : names[i];
    const FieldDescriptor* f = m->GetDescriptor()->FindFieldByName(name);
    EXPECT_NE(f, nullptr) << request << "." << pattern;
    if (f == nullptr) return root;
    *path += (path->empty() ? "" : ".") + name + (repeated ? "[0]" : "");
    const auto* r = m->GetReflection();
    if (i + 1 == names.size()) {
      if (repeated) {
        r->AddString(m, f, value);
      } else {
        r->SetString(m, f, value);
      }
    } else {
      m = repeated ? r->AddMessage(m, f) : r->MutableMessage(m, f);
    }
  }
  return root;
}

TEST(RequestLimits, EveryStringFieldOfEveryRequestHasARowAndEveryRowAField) {
  std::set<std::pair<std::string, std::string>> fields;
  for (const Descriptor* d : RequestMessages()) {
    std::vector<std::string> patterns;
    StringFieldPatterns(d, "", &patterns);
    for (const std::string& p : patterns) {
      fields.insert({d->name(), p});
      EXPECT_NE(FindRequestFieldLimit(d->name(), p), nullptr)
          << d->name() << "." << p << " has no row in RequestFieldLimits()";
    }
  }
  EXPECT_GE(fields.size(), 30u);
  for (const RequestFieldLimit& row : RequestFieldLimits()) {
    EXPECT_EQ(fields.count({row.request, row.field}), 1u)
        << row.request << "." << row.field << " is not a string field of a request";
  }
}

TEST(RequestLimits, EveryFieldOverItsLimitIsRefusedNamingItsPathWithoutEchoingIt) {
  for (const RequestFieldLimit& row : RequestFieldLimits()) {
    std::string path;
    auto req = RequestWithField(row.request, row.field, std::string(row.max_bytes + 1, 'a'), &path);
    const Status s = CheckRequestLimits(*req);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << row.request << "." << row.field;
    EXPECT_EQ(s.message().rfind(path + ": ", 0), 0u) << s.message();
    EXPECT_NE(s.message().find("over the limit of " + std::to_string(row.max_bytes)),
              std::string::npos)
        << s.message();
    EXPECT_LT(s.message().size(), 400u) << row.request << "." << row.field;
    if (row.allowed.empty()) {
      // At the limit exactly, free text and names pass.
      auto at_limit =
          RequestWithField(row.request, row.field, std::string(row.max_bytes, 'a'), &path);
      const Status ok = CheckRequestLimits(*at_limit);
      EXPECT_TRUE(ok.ok()) << ok.ToString();
    }
  }
}

TEST(RequestLimits, NamesRefuseControlCharactersAndTextKeepsNewlines) {
  int names = 0;
  for (const RequestFieldLimit& row : RequestFieldLimits()) {
    if (!row.allowed.empty()) continue;
    std::string path;
    auto req = RequestWithField(row.request, row.field, "two\nlines\x1b[2J", &path);
    const Status s = CheckRequestLimits(*req);
    if (row.is_name) {
      ++names;
      EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << row.request << "." << row.field;
      EXPECT_EQ(s.message().rfind(path + ": holds a control character", 0), 0u) << s.message();
      // The quoted excerpt is escaped: no raw ESC reaches a terminal that prints the error.
      EXPECT_EQ(s.message().find('\x1b'), std::string::npos) << s.message();
    } else {
      EXPECT_TRUE(s.ok()) << row.request << "." << row.field << ": " << s.ToString();
    }
  }
  EXPECT_GE(names, 15);
}

TEST(RequestLimits, RepeatedFieldsAreNamedWithTheirIndex) {
  xv::v1::SubmitRequest req;
  for (int i = 0; i < 4; ++i) {
    auto* c = req.add_candidates();
    c->set_name("c" + std::to_string(i));
    auto* o = c->add_overrides();
    o->set_key("matrix_lr");
    o->set_value("0.0" + std::to_string(i + 1));
  }
  EXPECT_TRUE(CheckRequestLimits(req).ok());
  req.mutable_candidates(3)->set_name(std::string(1 << 20, 'n'));
  Status s = CheckRequestLimits(req);
  EXPECT_EQ(s.message(), "candidates[3].name: 1048576 bytes, over the limit of 200 (shorten it)");
  req.mutable_candidates(3)->set_name("c3");
  req.mutable_candidates(2)->add_overrides()->set_key("bad\tkey");
  s = CheckRequestLimits(req);
  EXPECT_EQ(s.message().rfind("candidates[2].overrides[1].key: holds a control character", 0), 0u)
      << s.message();
  xv::v1::WatchRequest watch;
  watch.add_kinds("state");
  watch.add_kinds(std::string(65, 'k'));
  s = CheckRequestLimits(watch);
  EXPECT_EQ(s.message().rfind("kinds[1]: 65 bytes", 0), 0u) << s.message();
}

TEST(RequestLimits, EnumLikeFieldsRefuseUnknownWordsListingTheAllowedOnes) {
  xv::v1::ListExperimentsRequest list;
  list.set_state("pwned");
  Status s = CheckRequestLimits(list);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(
      s.message(),
      "state: \"pwned\" is not one of queued, assigned, running, succeeded, diverged, failed, "
      "invalid, cancelled, timed_out, lost (or empty)");
  int enums = 0;
  for (const RequestFieldLimit& row : RequestFieldLimits()) {
    if (row.allowed.empty()) continue;
    ++enums;
    std::string path;
    for (const std::string& word : row.allowed) {
      const Status ok = CheckRequestLimits(*RequestWithField(row.request, row.field, word, &path));
      EXPECT_TRUE(ok.ok()) << row.request << "." << row.field << " '" << word << "'";
    }
    const Status bad =
        CheckRequestLimits(*RequestWithField(row.request, row.field, "Queued", &path));
    EXPECT_EQ(bad.message().rfind(path + ": \"Queued\" is not one of ", 0), 0u) << bad.message();
  }
  // ListExperiments state, decision, order_by; Submit kind; ListPlans state.
  EXPECT_EQ(enums, 5);
}

TEST(RequestLimits, InvalidUtf8IsRefusedNamingTheField) {
  // protobuf refuses such requests before a handler runs; requests built inside the daemon are
  // checked the same way.
  xv::v1::CreateCampaignRequest req;
  req.set_name("lr");
  req.set_device_filter("gpu\xff");
  const Status s = CheckRequestLimits(req);
  EXPECT_EQ(s.message().rfind("device_filter: not valid UTF-8", 0), 0u) << s.message();
}

TEST(GrpcStatusEdge, MessagesAreCutOnACodePointBoundaryWithTheirLength) {
  std::string long_message = "recipe: ";
  for (int i = 0; i < 5000; ++i) long_message += "é";  // 2 bytes each
  const grpc::Status gs = ToGrpcStatus(Status::InvalidArgument(long_message));
  EXPECT_EQ(gs.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_LE(gs.error_message().size(), kMaxStatusMessageBytes + 64);
  EXPECT_EQ(gs.error_message().rfind("recipe: éé", 0), 0u);
  EXPECT_NE(gs.error_message().find("(message cut: 10008 bytes)"), std::string::npos)
      << gs.error_message().substr(gs.error_message().size() - 80);
  const std::string kept = gs.error_message().substr(0, gs.error_message().find("…"));
  EXPECT_TRUE(IsValidUtf8(kept));
  EXPECT_EQ((kept.size() - 8) % 2, 0u);  // no half 'é'
  // Short messages pass unchanged; invalid UTF-8 is repaired.
  EXPECT_EQ(ToGrpcStatus(Status::NotFound("experiment 7")).error_message(), "experiment 7");
  EXPECT_EQ(BoundedStatusMessage("a\xff"), "a\xEF\xBF\xBD");
  EXPECT_TRUE(ToGrpcStatus(Status::Ok()).ok());
}

// docs/agent.md § Limits of the API prints the table: one line per row with its limit.
TEST(RequestLimits, AgentDocsListEveryRowWithItsLimit) {
  const char* src = std::getenv("XV_SOURCE_DIR");
  ASSERT_NE(src, nullptr) << "XV_SOURCE_DIR is set by ctest";
  std::ifstream f(std::string(src) + "/docs/agent.md");
  ASSERT_TRUE(f.good());
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string doc = ss.str();
  for (const RequestFieldLimit& row : RequestFieldLimits()) {
    const std::string line = std::string("| `") + row.request + "` | `" + row.field + "` | " +
                             std::to_string(row.max_bytes) + " |";
    EXPECT_NE(doc.find(line), std::string::npos) << "docs/agent.md lacks the line: " << line;
  }
}

// `n` campaigns of about `bytes` each, named c0, c1, ... in order.
xv::v1::ListCampaignsResponse Campaigns(int n, size_t bytes) {
  xv::v1::ListCampaignsResponse r;
  for (int i = 0; i < n; ++i) {
    xv::v1::Campaign* c = r.add_campaigns();
    c->set_name("c" + std::to_string(i));
    c->set_head_recipe_json(std::string(bytes, 'x'));
  }
  return r;
}

TEST(ReplyCaps, TrimsTheListUnderTheCapKeepingTheAskedEnd) {
  xv::v1::ListCampaignsResponse r = Campaigns(100, 1000);
  EXPECT_EQ(TrimRowsToReplyCap(r, r.mutable_campaigns(), KeepRows::kFirst, 20000), 81);
  EXPECT_LE(r.ByteSizeLong(), 20000u);
  ASSERT_EQ(r.campaigns_size(), 19);
  EXPECT_EQ(r.campaigns(0).name(), "c0");
  EXPECT_EQ(r.campaigns(18).name(), "c18");

  r = Campaigns(100, 1000);
  EXPECT_EQ(TrimRowsToReplyCap(r, r.mutable_campaigns(), KeepRows::kLast, 20000), 81);
  EXPECT_LE(r.ByteSizeLong(), 20000u);
  ASSERT_EQ(r.campaigns_size(), 19);
  EXPECT_EQ(r.campaigns(0).name(), "c81");
  EXPECT_EQ(r.campaigns(18).name(), "c99");
}

TEST(ReplyCaps, LeavesAReplyUnderTheCapAndOneRowAlone) {
  xv::v1::ListCampaignsResponse r = Campaigns(10, 100);
  EXPECT_EQ(TrimRowsToReplyCap(r, r.mutable_campaigns(), KeepRows::kFirst), 0);
  EXPECT_EQ(r.campaigns_size(), 10);
  r = Campaigns(3, 5000);  // one row over the cap: it stays, so the caller sees something
  EXPECT_EQ(TrimRowsToReplyCap(r, r.mutable_campaigns(), KeepRows::kLast, 1000), 2);
  ASSERT_EQ(r.campaigns_size(), 1);
  EXPECT_EQ(r.campaigns(0).name(), "c2");
  // The default cap: 6 MiB of campaigns come back under 4 MiB.
  r = Campaigns(6 * 1024, 1024);
  EXPECT_GT(TrimRowsToReplyCap(r, r.mutable_campaigns(), KeepRows::kLast), 0);
  EXPECT_LE(r.ByteSizeLong(), kMaxListReplyBytes);
  EXPECT_GT(r.ByteSizeLong(), kMaxListReplyBytes - 2 * 1040);  // within two rows of it
}

}  // namespace
}  // namespace xv::daemon
