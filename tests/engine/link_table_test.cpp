#include "engine/link_table.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "engine/reassembler.hpp"

namespace mcdma::daemon {
namespace {

std::unique_ptr<EngineLink> MakeLink(uint64_t id, const std::string& peer, LinkOrigin origin,
                                     uint64_t generation = 1) {
  auto l = std::make_unique<EngineLink>();
  l->id = id;
  l->spec.peer = peer;
  l->spec.origin = origin;
  l->spec.generation = generation;
  return l;
}

TEST(TransportNames, AreTheSpellingsOfTheConfigAndTheProtocol) {
  EXPECT_EQ(TransportName(Transport::kLoop), "loop");
  EXPECT_EQ(TransportName(Transport::kTcp), "tcp");
  EXPECT_EQ(TransportName(Transport::kVerbs), "verbs");
  EXPECT_EQ(TransportFromName("verbs"), Transport::kVerbs);
  EXPECT_EQ(TransportFromName("tcp"), Transport::kTcp);
  EXPECT_FALSE(TransportFromName("auto").has_value());
  EXPECT_EQ(OriginName(LinkOrigin::kOut), "out");
  EXPECT_EQ(OriginName(LinkOrigin::kIn), "in");
}

TEST(LinkTable, PrefersTheDialedLinkAndSkipsFailedOnes) {
  LinkTable t;
  t.Add(MakeLink(1, "b", LinkOrigin::kIn));
  t.Add(MakeLink(2, "b", LinkOrigin::kOut));
  t.Add(MakeLink(3, "c", LinkOrigin::kIn));
  ASSERT_NE(t.To("b"), nullptr);
  EXPECT_EQ(t.To("b")->id, 2U);
  t.Find(2)->failed = true;
  EXPECT_EQ(t.To("b")->id, 1U);
  EXPECT_EQ(t.To("c")->id, 3U);
  EXPECT_EQ(t.To("d"), nullptr);
  EXPECT_EQ(t.Find(LinkKey{"b", LinkOrigin::kOut})->id, 2U);  // failed, still installed
  EXPECT_EQ(t.Find(LinkKey{"c", LinkOrigin::kOut}), nullptr);
  auto to_b = t.IdsTo("b");
  std::sort(to_b.begin(), to_b.end());
  EXPECT_EQ(to_b, (std::vector<uint64_t>{1, 2}));
}

TEST(LinkTable, CountersOutliveTheLinkAndCarryAcrossGenerations) {
  LinkTable t;
  t.Add(MakeLink(1, "b", LinkOrigin::kOut, 1));
  t.Find(1)->stats->messages_sent = 5;
  t.Find(1)->stats->calls_out = 2;
  ASSERT_NE(t.Remove(1), nullptr);
  EXPECT_EQ(t.Remove(1), nullptr);
  auto snaps = t.Snapshots([](uint64_t) { return 0U; });
  ASSERT_EQ(snaps.size(), 1U);
  EXPECT_EQ(snaps[0].id, 0U);  // no live link: counters only
  EXPECT_EQ(snaps[0].peer, "b");
  EXPECT_EQ(snaps[0].origin, LinkOrigin::kOut);
  EXPECT_EQ(snaps[0].stats.messages_sent, 5U);
  // The next generation of the pair counts on.
  t.Add(MakeLink(7, "b", LinkOrigin::kOut, 2));
  ++t.Find(7)->stats->messages_sent;
  // The other origin of the same peer has counters of its own.
  t.Add(MakeLink(8, "b", LinkOrigin::kIn, 1));
  ++t.Find(8)->stats->calls_in;
  snaps = t.Snapshots([](uint64_t id) { return id == 7 ? 3U : 0U; });
  ASSERT_EQ(snaps.size(), 2U);
  auto out = std::find_if(snaps.begin(), snaps.end(),
                          [](const LinkSnapshot& s) { return s.origin == LinkOrigin::kOut; });
  ASSERT_NE(out, snaps.end());
  EXPECT_EQ(out->id, 7U);
  EXPECT_EQ(out->generation, 2U);
  EXPECT_EQ(out->inflight, 3U);
  EXPECT_EQ(out->stats.messages_sent, 6U);
  EXPECT_EQ(out->stats.calls_out, 2U);
  auto in = std::find_if(snaps.begin(), snaps.end(),
                         [](const LinkSnapshot& s) { return s.origin == LinkOrigin::kIn; });
  ASSERT_NE(in, snaps.end());
  EXPECT_EQ(in->stats.calls_in, 1U);
  EXPECT_EQ(in->stats.messages_sent, 0U);
}

TEST(LinkTable, EchoesAreAnsweredOnceAndFailWithTheirLink) {
  LinkTable t;
  std::vector<std::string> results;
  auto waiter = [&](uint64_t link, std::string payload) {
    return LinkTable::EchoWaiter{link, std::move(payload),
                                 [&results](Result<std::string> r, std::chrono::nanoseconds) {
                                   results.push_back(r.ok() ? *r : r.status().message());
                                 }};
  };
  t.AddEcho(10, waiter(1, "x"));
  t.AddEcho(11, waiter(1, "y"));
  t.AddEcho(12, waiter(2, "z"));
  auto echo = t.TakeEcho(12);
  ASSERT_TRUE(echo.has_value());
  EXPECT_EQ(echo->payload, "z");
  echo->done(std::string("z"), std::chrono::nanoseconds(0));
  EXPECT_FALSE(t.TakeEcho(12).has_value());
  auto down = t.TakeEchoesOn(1);
  ASSERT_EQ(down.size(), 2U);
  for (auto& w : down) w.done(Status(Code::kLinkDown, "down"), std::chrono::nanoseconds(0));
  EXPECT_EQ(results, (std::vector<std::string>{"z", "down", "down"}));
  EXPECT_FALSE(t.TakeEcho(10).has_value());
  EXPECT_FALSE(t.TakeEcho(11).has_value());
}

// One fragment: header and `n` payload bytes starting at `off` of a
// `total`-byte message of `type` and `id`, payload bytes 'a' + offset % 26.
std::vector<std::byte> Fragment(link_wire::MsgType type, uint64_t id, uint32_t total, uint32_t off,
                                uint32_t n) {
  std::vector<std::byte> f(link_wire::kHeaderBytes + n);
  link_wire::Header h;
  h.type = type;
  h.id = id;
  h.total_len = total;
  h.frag_off = off;
  h.seq = id;
  link_wire::Encode(h, f.data());
  for (uint32_t i = 0; i < n; ++i)
    f[link_wire::kHeaderBytes + i] = static_cast<std::byte>('a' + (off + i) % 26);
  return f;
}

TEST(Reassembler, OneFragmentMessageComesOutWhole) {
  Reassembler r;
  auto f = Fragment(link_wire::MsgType::kCall, 4, 5, 0, 5);
  auto m = r.Feed(f, 1024);
  ASSERT_TRUE(m.ok());
  ASSERT_TRUE(m->has_value());
  EXPECT_EQ((*m)->header.id, 4U);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>((*m)->payload.data()), 5), "abcde");
  EXPECT_FALSE(r.partial());
}

TEST(Reassembler, FragmentsInOrderMakeOneMessage) {
  Reassembler r;
  auto a = Fragment(link_wire::MsgType::kReply, 9, 30, 0, 12);
  auto b = Fragment(link_wire::MsgType::kReply, 9, 30, 12, 12);
  auto c = Fragment(link_wire::MsgType::kReply, 9, 30, 24, 6);
  auto m = r.Feed(a, 1024);
  ASSERT_TRUE(m.ok());
  EXPECT_FALSE(m->has_value());
  EXPECT_TRUE(r.partial());
  m = r.Feed(b, 1024);
  ASSERT_TRUE(m.ok());
  EXPECT_FALSE(m->has_value());
  m = r.Feed(c, 1024);
  ASSERT_TRUE(m.ok());
  ASSERT_TRUE(m->has_value());
  EXPECT_EQ((*m)->header.type, link_wire::MsgType::kReply);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>((*m)->payload.data()), 30),
            "abcdefghijklmnopqrstuvwxyzabcd");
  EXPECT_FALSE(r.partial());
}

TEST(Reassembler, BrokenOrderAndOversizeAreProtocolErrors) {
  {
    Reassembler r;
    ASSERT_TRUE(r.Feed(Fragment(link_wire::MsgType::kCall, 1, 20, 0, 10), 1024).ok());
    // Another message's fragment in the middle.
    auto m = r.Feed(Fragment(link_wire::MsgType::kCall, 2, 20, 10, 10), 1024);
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.status().code(), Code::kLinkDown);
    EXPECT_EQ(m.status().message(), "protocol error from peer: fragments out of order");
  }
  {
    Reassembler r;
    auto m = r.Feed(Fragment(link_wire::MsgType::kCall, 1, 20, 10, 10), 1024);
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.status().message(), "protocol error from peer: a message starts mid-way");
  }
  {
    Reassembler r;
    auto m = r.Feed(Fragment(link_wire::MsgType::kCall, 1, 2000, 0, 10), 1024);
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.status().message(),
              "protocol error from peer: a message of 2000 bytes is larger than any receiver "
              "could take");
    EXPECT_FALSE(r.partial());  // nothing buffered
  }
  {
    Reassembler r;
    auto f = Fragment(link_wire::MsgType::kCall, 1, 5, 0, 5);
    f[0] = std::byte{0};  // magic
    auto m = r.Feed(f, 1024);
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.status().message(), "protocol error from peer: bad magic");
  }
}

}  // namespace
}  // namespace mcdma::daemon

namespace mcdma::daemon {
namespace {

TEST(LinkFailureText, NamesTheCodeOnceAtMost) {
  EXPECT_EQ(LinkFailureText(Code::kLinkDown, "connection reset"), "connection reset");
  EXPECT_EQ(LinkFailureText(Code::kInternal, "bad frame"),
            "the transport failed with INTERNAL: bad frame");
  EXPECT_EQ(LinkFailureText(Code::kLinkDown, ""), "transport error");
  Status as_app_sees_it(Code::kLinkDown, LinkFailureText(Code::kLinkDown, "connection reset"));
  EXPECT_EQ(as_app_sees_it.ToString().find("LINK_DOWN: LINK_DOWN"), std::string::npos);
}

}  // namespace
}  // namespace mcdma::daemon
