// Who may use a link, and for what: a peer with another fabric key is
// refused; the Peer service answers nothing without a ticket; an export is
// resolvable only from the hosts it lists; transfers stay inside it.
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <map>

#include "pattern.hpp"
#include "test_util.hpp"
#include "two_hosts.hpp"

namespace mcdma::itest {
namespace {

bool Mentions(const std::string& text, std::initializer_list<const char*> words) {
  std::string l = Lower(text);
  return std::any_of(words.begin(), words.end(),
                     [&](const char* w) { return l.find(w) != std::string::npos; });
}

// ---- a peer with another fabric key ----

class LinkWrongKey : public TwoHosts {
 protected:
  bool LinkAtSetUp() const override { return false; }
};

TEST_P(LinkWrongKey, PeerWithAnotherFabricKeyIsRefused) {
  b().key = NewFabricKey("other.key");
  ASSERT_FALSE(b().key.empty());
  ASSERT_TRUE(StartDaemon(b()));
  ASSERT_TRUE(StartDaemon(a()));
  v1::LinkInfo last;
  EXPECT_TRUE(WaitLink(
      a(), "host-b", [](const v1::LinkInfo& l) { return l.state() == "refused"; }, Millis(15000),
      &last))
      << "host-a's link to a host with another fabric key: " << LinkSummary(last);
  EXPECT_TRUE(Mentions(last.last_error(), {"fabric key"}))
      << "last_error should say the fabric key was the problem: '" << last.last_error() << "'";
  EXPECT_EQ(last.generation(), 0u) << "a refused link must never have had a data link";
  if (auto lb = LinkTo(b(), "host-a")) {
    EXPECT_NE(lb->state(), "up") << LinkSummary(*lb);
  }

  ASSERT_NE(StartReady(b(), "serve", {"--service", "echo"}), nullptr);
  auto owner_b = Connect(b(), "owner-b");
  auto app_a = Connect(a(), "app-a");
  ASSERT_TRUE(owner_b && app_a);
  auto buf = owner_b->Alloc(kMiB);
  ASSERT_TRUE(buf.ok()) << buf.status().ToString();
  ExportOptions eo;
  eo.allowed_peers = {"host-a"};
  ASSERT_TRUE(owner_b->Export(*buf, "granted", eo).ok());

  auto call = app_a->Call("host-b/echo", std::string_view("hello"), Millis(3000));
  ASSERT_FALSE(call.ok()) << "a call reached a host with another fabric key";
  EXPECT_TRUE(call.status().code() == Code::kLinkDown || call.status().code() == Code::kUnavailable)
      << call.status().ToString();
  EXPECT_TRUE(Mentions(call.status().message(), {"refused", "fabric key"}))
      << "the error should say the link was refused: " << call.status().ToString();
  auto resolved = app_a->Resolve("granted", "host-b");
  ASSERT_FALSE(resolved.ok()) << "an export resolved across a refused link";
  EXPECT_TRUE(resolved.status().code() == Code::kLinkDown ||
              resolved.status().code() == Code::kUnavailable)
      << resolved.status().ToString();
  EXPECT_TRUE(Mentions(resolved.status().message(), {"refused", "fabric key"}))
      << resolved.status().ToString();
  // Nor the other way round: host-b has no link to host-a.
  EXPECT_FALSE(owner_b->Call("host-a/echo", std::string_view("hello"), Millis(3000)).ok());

  // Local work on host-a is unaffected.
  ASSERT_TRUE(app_a->Serve("local-echo", [](ServerCall& c) { (void)c.Reply(c.payload()); }).ok());
  auto caller = Connect(a(), "local-caller");
  ASSERT_NE(caller, nullptr);
  auto local = caller->Call("local-echo", std::string_view("still here"));
  ASSERT_TRUE(local.ok()) << local.status().ToString();
  EXPECT_EQ(local->view(), "still here");
  EXPECT_TRUE(DaemonAlive(a()) && DaemonAlive(b()));
}

// A key file others can read is refused at start, naming the mode.
TEST_P(LinkWrongKey, FabricKeyFileWithLooseModeIsRefused) {
  ASSERT_EQ(chmod(a().key.c_str(), 0644), 0);
  CommandResult r = RunCommand(DaemonArgv(a()), Millis(15000));
  EXPECT_TRUE(r.exit_code() == 1 || r.exit_code() == 2) << r.Describe();
  EXPECT_TRUE(Mentions(r.err, {"0644", "mode"})) << "the error should name the mode: " << r.err;
}

// ---- the Peer service without a ticket ----

class LinkSecurity : public TwoHosts {};

TEST_P(LinkSecurity, PeerServiceAnswersNothingWithoutATicket) {
  // Something real to ask for, so a missing check cannot hide behind NOT_FOUND.
  ASSERT_NE(StartReady(b(), "serve", {"--service", "echo"}), nullptr);
  auto owner_b = Connect(b(), "owner-b");
  ASSERT_NE(owner_b, nullptr);
  auto buf = owner_b->Alloc(kMiB);
  ASSERT_TRUE(buf.ok());
  ExportOptions eo;
  eo.allowed_peers = {"host-a", "intruder"};
  ASSERT_TRUE(owner_b->Export(*buf, "secret", eo).ok());

  // From host-a's network (its namespace), straight at host-b's Peer service.
  Child* raw = StartApp(a(), "peer-raw",
                        {"--address", b().listen(), "--export", "secret", "--service", "echo",
                         "--host-id", "intruder"});
  ASSERT_NE(raw, nullptr);
  auto line = raw->WaitForPrefix("{", Millis(60000));
  ASSERT_TRUE(line.has_value()) << raw->Describe();
  EXPECT_TRUE(ExitedWith(raw->WaitExit(Millis(10000)), 0)) << *line;
  for (const char* method : {"hello", "resolve", "lookup", "connect", "heartbeat"}) {
    EXPECT_EQ(StrField(*line, method), "UNAUTHENTICATED")
        << method << " without a ticket: " << *line;
    EXPECT_EQ(StrField(*line, std::string(method) + "_forged"), "UNAUTHENTICATED")
        << method << " with a forged ticket: " << *line;
  }
  EXPECT_EQ(StrField(*line, "challenge_host"), "host-b") << *line;
  EXPECT_EQ(StrField(*line, "auth"), "UNAUTHENTICATED") << "a wrong proof: " << *line;
  EXPECT_TRUE(Mentions(StrField(*line, "auth_message"), {"fabric key mismatch"})) << *line;
  EXPECT_EQ(Field(*line, "ticket"), 0u) << "a ticket was issued for a wrong proof: " << *line;

  // The intruder disturbed nothing: the real link still carries calls.
  auto la = LinkTo(a(), "host-b");
  ASSERT_TRUE(la.has_value());
  EXPECT_EQ(la->state(), "up") << LinkSummary(*la);
  EXPECT_EQ(la->generation(), 1u) << LinkSummary(*la);
  auto app_a = Connect(a(), "app-a");
  ASSERT_NE(app_a, nullptr);
  auto r = app_a->Call("host-b/echo", std::string_view("after the intruder"), Millis(5000));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->view(), "after the intruder");
}

// ---- exports across the link ----

TEST_P(LinkSecurity, ExportIsResolvableOnlyFromTheHostsItLists) {
  auto owner_b = Connect(b(), "owner-b");
  auto app_a = Connect(a(), "app-a");
  ASSERT_TRUE(owner_b && app_a);
  auto buf = owner_b->Alloc(kMiB);
  ASSERT_TRUE(buf.ok());
  FillPattern(buf->data(), kMiB, 5);
  ExportOptions none;  // no allowed_peers: this host only
  ASSERT_TRUE(owner_b->Export(*buf, "local-only", none).ok());
  ExportOptions other;
  other.allowed_peers = {"host-c"};
  ASSERT_TRUE(owner_b->Export(*buf, "host-c-only", other).ok());
  ExportOptions ro;
  ro.allowed_peers = {"host-a"};
  ro.allow_read = true;
  ro.allow_write = false;
  ASSERT_TRUE(owner_b->Export(*buf, "granted-ro", ro).ok());

  for (const char* name : {"local-only", "host-c-only"}) {
    auto r = app_a->Resolve(name, "host-b");
    ASSERT_FALSE(r.ok()) << name << " resolved from a host it does not list";
    EXPECT_EQ(r.status().code(), Code::kPermissionDenied) << name << ": " << r.status().ToString();
  }
  auto missing = app_a->Resolve("no-such-export", "host-b");
  EXPECT_EQ(missing.status().code(), Code::kNotFound) << missing.status().ToString();
  // The owner's host is unaffected by the grant list.
  auto local = owner_b->Resolve("local-only");
  EXPECT_TRUE(local.ok()) << local.status().ToString();

  auto remote = app_a->Resolve("granted-ro", "host-b");
  ASSERT_TRUE(remote.ok()) << remote.status().ToString();
  EXPECT_EQ(remote->length, kMiB);
  EXPECT_TRUE(remote->readable);
  EXPECT_FALSE(remote->writable);
  EXPECT_EQ(remote->peer, "host-b");
  auto dst = app_a->Alloc(kMiB);
  ASSERT_TRUE(dst.ok());
  auto n = app_a->Read(*remote, 0, *dst, 0, kMiB);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, kMiB);
  VerifyResult v = VerifyPattern(dst->data(), kMiB, 5);
  EXPECT_TRUE(v.ok) << v.bad_bytes << " bad bytes from " << v.first_bad;
  auto w = app_a->Write(*remote, 0, *dst, 0, 4096);
  ASSERT_FALSE(w.ok()) << "wrote through a read-only export";
  EXPECT_EQ(w.status().code(), Code::kPermissionDenied) << w.status().ToString();
  EXPECT_TRUE(VerifyPattern(buf->data(), kMiB, 5).ok) << "a refused write changed the export";
}

TEST_P(LinkSecurity, TransfersPastTheExportEndAreOutOfRange) {
  auto owner_b = Connect(b(), "owner-b");
  auto app_a = Connect(a(), "app-a");
  ASSERT_TRUE(owner_b && app_a);
  auto buf = owner_b->Alloc(kMiB);
  ASSERT_TRUE(buf.ok());
  FillPattern(buf->data(), kMiB, 9);
  // A window in the middle of the buffer: bytes on both sides must stay untouched.
  constexpr uint64_t kOff = 64 * kKiB;
  constexpr uint64_t kLen = 512 * kKiB;
  ExportOptions eo;
  eo.offset = kOff;
  eo.length = kLen;
  eo.allow_write = true;
  eo.allowed_peers = {"host-a"};
  ASSERT_TRUE(owner_b->Export(*buf, "window", eo).ok());
  auto remote = app_a->Resolve("window", "host-b");
  ASSERT_TRUE(remote.ok()) << remote.status().ToString();
  EXPECT_EQ(remote->length, kLen);
  auto local = app_a->Alloc(kMiB);
  ASSERT_TRUE(local.ok());

  auto all = app_a->Read(*remote, 0, *local, 0, kLen);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  VerifyResult v = VerifyPattern(local->data(), kLen, 9, kOff);
  EXPECT_TRUE(v.ok) << "the window read wrong: " << v.bad_bytes << " bad bytes from "
                    << v.first_bad;

  struct Case {
    const char* what;
    uint64_t offset;
    uint64_t length;
  };
  for (const Case& c :
       {Case{"straddling the end", kLen - 100, 4096}, Case{"starting at the end", kLen, 1},
        Case{"past the end", kLen + 4096, 4096},
        Case{"wrapping around 2^64", ~uint64_t{0} - 10, 100}}) {
    FillPattern(local->data(), 4096, 77);
    auto r = app_a->Read(*remote, c.offset, *local, 0, c.length);
    EXPECT_EQ(r.status().code(), Code::kOutOfRange)
        << "read " << c.what << ": " << r.status().ToString();
    auto w = app_a->Write(*remote, c.offset, *local, 0, c.length);
    EXPECT_EQ(w.status().code(), Code::kOutOfRange)
        << "write " << c.what << ": " << w.status().ToString();
  }
  // Nothing outside the window changed, and the window itself neither.
  v = VerifyPattern(buf->data(), kMiB, 9);
  EXPECT_TRUE(v.ok) << "refused writes changed the exporter's buffer: " << v.bad_bytes
                    << " bad bytes from " << v.first_bad;

  // A write at the very end of the window lands exactly there.
  FillPattern(local->data(), 4096, 10);
  auto tail = app_a->Write(*remote, kLen - 4096, *local, 0, 4096);
  ASSERT_TRUE(tail.ok()) << tail.status().ToString();
  EXPECT_TRUE(VerifyPattern(buf->data() + kOff + kLen - 4096, 4096, 10).ok);
  EXPECT_TRUE(VerifyPattern(buf->data(), kOff + kLen - 4096, 9).ok);
  EXPECT_TRUE(VerifyPattern(buf->data() + kOff + kLen, kMiB - kOff - kLen, 9, kOff + kLen).ok);

  auto la = LinkTo(a(), "host-b");
  ASSERT_TRUE(la.has_value());
  EXPECT_EQ(la->state(), "up") << "refused transfers must not take the link down: "
                               << LinkSummary(*la);
}

// An export withdrawn on its own host stops working across the link too:
// Unexport, TTL expiry, and the owner's session ending.
TEST_P(LinkSecurity, ExportWithdrawnOnItsHostFailsRemoteTransfers) {
  auto owner_b = Connect(b(), "owner-b");
  auto app_a = Connect(a(), "app-a");
  ASSERT_TRUE(owner_b && app_a);
  auto buf = owner_b->Alloc(kMiB);
  ASSERT_TRUE(buf.ok());
  FillPattern(buf->data(), kMiB, 3);
  auto local = app_a->Alloc(kMiB);
  ASSERT_TRUE(local.ok());
  ExportOptions eo;
  eo.allowed_peers = {"host-a"};
  ASSERT_TRUE(owner_b->Export(*buf, "unexported", eo).ok());
  ASSERT_TRUE(owner_b->Export(*buf, "owned", eo).ok());
  ExportOptions ttl = eo;
  ttl.ttl = Millis(700);
  ASSERT_TRUE(owner_b->Export(*buf, "expiring", ttl).ok());
  std::map<std::string, RemoteBuffer> remotes;
  for (const char* name : {"unexported", "owned", "expiring"}) {
    auto r = app_a->Resolve(name, "host-b");
    ASSERT_TRUE(r.ok()) << name << ": " << r.status().ToString();
    auto n = app_a->Read(*r, 0, *local, 0, 4096);
    ASSERT_TRUE(n.ok()) << name << ": " << n.status().ToString();
    remotes[name] = *r;
  }
  // Polls reads of `name` until one fails (5 s); its status.
  auto first_failure = [&](const std::string& name) {
    Status last;
    PollUntil(
        [&] {
          auto n = app_a->Read(remotes[name], 0, *local, 0, 4096, Millis(3000));
          last = n.ok() ? Status() : n.status();
          return !n.ok();
        },
        Millis(5000), Millis(20));
    return last;
  };

  ASSERT_TRUE(owner_b->Unexport("unexported").ok());
  Status st = first_failure("unexported");
  EXPECT_EQ(st.code(), Code::kRevoked) << "after Unexport: " << st.ToString();
  auto again = app_a->Resolve("unexported", "host-b");
  EXPECT_EQ(again.status().code(), Code::kNotFound) << again.status().ToString();

  st = first_failure("expiring");
  EXPECT_EQ(st.code(), Code::kRevoked) << "after the TTL: " << st.ToString();

  owner_b.reset();
  st = first_failure("owned");
  EXPECT_TRUE(st.code() == Code::kRevoked || st.code() == Code::kPeerGone)
      << "after the owner's session ended: " << st.ToString();

  auto la = LinkTo(a(), "host-b");
  ASSERT_TRUE(la.has_value());
  EXPECT_EQ(la->state(), "up") << LinkSummary(*la);
  EXPECT_EQ(la->generation(), 1u) << LinkSummary(*la);
}

INSTANTIATE_TEST_SUITE_P(Hosts, LinkWrongKey, kHostVariants, HostVariantName);
INSTANTIATE_TEST_SUITE_P(Hosts, LinkSecurity, kHostVariants, HostVariantName);

}  // namespace
}  // namespace mcdma::itest
