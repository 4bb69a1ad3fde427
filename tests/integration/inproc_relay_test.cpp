// Relaying and routed delivery (architecture.md §23, protocol.md §20) as a
// peer daemon sees them: an engine in this process ("relay-host") with two
// links whose other ends are raw loop connections the test drives message
// by message, as the engines of "relay-peer" and "next-peer" would. The
// test writes kRouted envelopes (route_wire::Encode) into the link from
// relay-peer and reads what the engine sends back or forwards; the
// engine's relay counters (Engine::relay_stats) say what it dropped and
// why. For the routed call, the engine also serves the Control service on
// a Unix socket in a temporary directory and a real Client serves the
// called service. Both ends of every link are loop connections (they
// progress when polled), so the data-link steps are deterministic.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <cctype>
#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "daemon.hpp"
#include "driver/loop/loop_transport.hpp"
#include "engine/engine.hpp"
#include "engine/link_wire.hpp"
#include "engine/route_wire.hpp"
#include "mcdma/client.hpp"
#include "service/control_service.hpp"
#include "test_util.hpp"

namespace mcdma::itest::inproc_relay {

using daemon::Engine;
using daemon::LinkSnapshot;
using daemon::RelayStats;
namespace link_wire = daemon::link_wire;
namespace route_wire = daemon::route_wire;
using link_wire::MsgType;

constexpr uint32_t kSlotBytes = 4096;
constexpr uint32_t kPeerRecvs = 16;
constexpr uint32_t kPeerSends = 8;
constexpr const char* kSelf = "relay-host";
constexpr const char* kSelfInstance = "relay-instance";
constexpr const char* kFar = "far-host";  // reached only through relay-peer
constexpr const char* kFarInstance = "far-instance";

// One message the engine sent a fake peer.
struct Received {
  link_wire::Header header;
  std::string payload;
};

// A kRouted message decoded, its inner payload copied out.
struct Routed {
  uint8_t hops = 0;
  std::string origin;
  std::string dest;
  std::string origin_instance;
  std::string dest_instance;
  uint64_t sender_epoch = 0;
  uint64_t ack_epoch = 0;
  link_wire::Header inner;
  std::string payload;
};

// An envelope as the test writes it.
struct Envelope {
  uint8_t hops = 1;
  std::string origin = kFar;
  std::string dest = kSelf;
  std::string origin_instance = kFarInstance;
  std::string dest_instance;
  uint64_t sender_epoch = 1;
  uint64_t ack_epoch = 0;
  link_wire::Header inner;
  std::string payload;

  std::string Encode() const {
    return route_wire::Encode(hops, origin, dest, origin_instance, dest_instance, sender_epoch,
                              ack_epoch, inner,
                              {reinterpret_cast<const std::byte*>(payload.data()), payload.size()});
  }
};

link_wire::Header Inner(MsgType type, uint64_t id, uint64_t seq) {
  link_wire::Header h;
  h.type = type;
  h.id = id;
  h.seq = seq;
  return h;
}

// The raw end of one link: the engine's peer as the test plays it.
struct FakePeer {
  explicit FakePeer(std::string name) : host(std::move(name)) {}

  std::string host;
  std::unique_ptr<driver::Endpoint> endpoint;
  std::unique_ptr<driver::Connection> conn;
  std::vector<std::byte> memory =
      std::vector<std::byte>(uint64_t{kPeerRecvs + kPeerSends} * kSlotBytes);
  std::unique_ptr<driver::MemoryRegion> region;
  uint64_t link = 0;
  uint64_t next_seq = 1;  // of the messages the test sends on this link
  uint32_t next_send = 0;
  std::vector<Received> received;
};

class InprocRelay : public ::testing::Test {
 protected:
  void SetUp() override {
    daemon::SetUpLogging("off");
    ASSERT_TRUE(dir_.ok()) << dir_.error();
    daemon::Options options;
    options.spin_budget_us = 0;
    options.link_recv_slots = 8;
    options.link_slot_bytes = kSlotBytes;
    options.host_id = kSelf;
    options.socket = dir_.Join("rpcd.sock");
    auto loop = driver::loop::CreateLoopDevice();
    auto link = driver::loop::CreateLoopDevice();
    ASSERT_TRUE(loop.ok() && link.ok());
    link_device_ = link->get();
    engine_ = std::make_unique<Engine>(
        options, Engine::Devices{std::move(*loop), std::move(*link), nullptr});
    ASSERT_TRUE(engine_->Start().ok());
    (void)engine_->Run([&] {
      engine_->SetLinkDownHandler(
          [this](uint64_t id, const std::string& why) { down_reasons_[id] = why; });
      return 0;
    });
    ASSERT_TRUE(AddPeer(relay_));
    ASSERT_TRUE(AddPeer(next_));
  }

  void TearDown() override {
    client_.reset();
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    server_.reset();
    control_.reset();
    if (engine_) {
      (void)engine_->Run([&] {
        for (FakePeer* p : {&relay_, &next_}) {
          p->conn.reset();
          p->region.reset();
          p->endpoint.reset();
        }
        return 0;
      });
      engine_->Stop();
    }
  }

  // Connects `p` to the engine and installs the link (the engine dialed).
  bool AddPeer(FakePeer& p) {
    auto ok = engine_->Run([&] {
      auto ours = engine_->CreateLinkEndpoint(daemon::Transport::kTcp);
      auto theirs = link_device_->CreateEndpoint();
      if (!ours.ok() || !theirs.ok()) return false;
      p.endpoint = std::move(*theirs);
      auto conn = (*ours)->Connect(p.endpoint->LocalInfo());
      auto peer_conn = p.endpoint->Connect((*ours)->LocalInfo());
      if (!conn.ok() || !peer_conn.ok()) return false;
      p.conn = std::move(*peer_conn);
      auto region = link_device_->Register(p.memory.data(), p.memory.size(), driver::kAccessLocal);
      if (!region.ok()) return false;
      p.region = std::move(*region);
      for (uint32_t i = 0; i < kPeerRecvs; ++i) {
        if (!p.conn->PostRecv(i, {p.region.get(), uint64_t{i} * kSlotBytes, kSlotBytes}).ok())
          return false;
      }
      daemon::LinkSpec spec{p.host, daemon::LinkOrigin::kOut, 1, p.host + "-instance",
                            0,      daemon::Transport::kTcp};
      auto id = engine_->InstallLink(spec, std::move(*conn));
      if (!id.ok()) return false;
      p.link = *id;
      return true;
    });
    return ok && *ok;
  }

  // Sends one whole message (one fragment) from `p`'s end, the next of its
  // link's sequence, then lets both ends progress.
  void Send(FakePeer& p, link_wire::Header h, const std::string& payload) {
    ASSERT_LE(link_wire::kHeaderBytes + payload.size(), kSlotBytes);
    h.seq = p.next_seq++;
    h.ack = 0;
    h.frag_off = 0;
    h.total_len = static_cast<uint32_t>(payload.size());
    const uint64_t off = uint64_t{kPeerRecvs + p.next_send++ % kPeerSends} * kSlotBytes;
    std::byte* out = p.memory.data() + off;
    link_wire::Encode(h, out);
    if (!payload.empty())
      std::memcpy(out + link_wire::kHeaderBytes, payload.data(), payload.size());
    auto posted = engine_->Run([&] {
      return p.conn->PostSend(1000 + off,
                              {p.region.get(), off, link_wire::kHeaderBytes + payload.size()});
    });
    ASSERT_TRUE(posted && posted->ok());
    Collect();
  }

  void SendRouted(FakePeer& p, const std::string& envelope) {
    Send(p, Inner(MsgType::kRouted, 0, 0), envelope);
  }

  // An ECHO on `p`'s link; true once its ECHO_REPLY came back: the link is
  // up and dispatching.
  bool EchoWorks(FakePeer& p) {
    const uint64_t id = 900 + p.next_seq;
    Send(p, Inner(MsgType::kEcho, id, 0), "still up");
    return WaitFor([&] {
      for (const Received& r : p.received)
        if (r.header.type == MsgType::kEchoReply && r.header.id == id) return true;
      return false;
    });
  }

  // Lets both ends progress, then takes what the engine sent each peer.
  void Collect() {
    for (int round = 0; round < 4; ++round) {
      (void)engine_->Run([&] {
        for (FakePeer* p : {&relay_, &next_}) {
          if (!p->conn) continue;
          driver::WorkCompletion wcs[32];
          size_t n;
          while ((n = p->conn->Poll(wcs)) > 0) {
            for (size_t i = 0; i < n; ++i) {
              if (wcs[i].op != driver::WorkOp::kRecv || wcs[i].code != Code::kOk) continue;
              const std::byte* in = p->memory.data() + wcs[i].wr_id * kSlotBytes;
              std::string why;
              auto h = link_wire::Decode(in, wcs[i].byte_len, &why);
              EXPECT_TRUE(h.has_value()) << why;
              if (h) {
                p->received.push_back(
                    {*h, std::string(reinterpret_cast<const char*>(in) + link_wire::kHeaderBytes,
                                     wcs[i].byte_len - link_wire::kHeaderBytes)});
              }
              (void)p->conn->PostRecv(wcs[i].wr_id,
                                      {p->region.get(), wcs[i].wr_id * kSlotBytes, kSlotBytes});
            }
          }
        }
        return 0;
      });
    }
  }

  // Collects until `done` holds or `timeout` passes.
  bool WaitFor(const std::function<bool()>& done,
               std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      Collect();
      if (done()) return true;
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  // The kRouted messages the engine sent `p`, decoded.
  static std::vector<Routed> RoutedTo(const FakePeer& p) {
    std::vector<Routed> out;
    for (const Received& r : p.received) {
      if (r.header.type != MsgType::kRouted) continue;
      std::string why;
      auto env = route_wire::Decode(
          {reinterpret_cast<const std::byte*>(r.payload.data()), r.payload.size()}, &why);
      EXPECT_TRUE(env.has_value()) << "the engine sent a malformed envelope: " << why;
      if (!env) continue;
      out.push_back(
          {env->hops, env->origin, env->dest, env->origin_instance, env->dest_instance,
           env->sender_epoch, env->ack_epoch, env->inner,
           std::string(reinterpret_cast<const char*>(env->payload.data()), env->payload.size())});
    }
    return out;
  }

  // The routed messages of inner type `type` sent to `p`, one per inner
  // seq (a message the engine sent again, unacknowledged, counts once).
  static std::vector<Routed> RoutedOfType(const FakePeer& p, MsgType type) {
    std::vector<Routed> out;
    std::map<uint64_t, bool> seen;
    for (Routed& r : RoutedTo(p)) {
      if (r.inner.type != type || seen[r.inner.seq]) continue;
      seen[r.inner.seq] = true;
      out.push_back(std::move(r));
    }
    return out;
  }

  std::optional<LinkSnapshot> Link(uint64_t id) {
    auto links = engine_->Run([&] { return engine_->Links(); });
    if (!links) return std::nullopt;
    for (const LinkSnapshot& s : *links)
      if (s.id == id) return s;
    return std::nullopt;
  }

  // The routed link to `peer` as Links() shows it.
  std::optional<LinkSnapshot> RoutedLink(const std::string& peer) {
    auto links = engine_->Run([&] { return engine_->Links(); });
    if (!links) return std::nullopt;
    for (const LinkSnapshot& s : *links)
      if (s.id != 0 && s.peer == peer && s.origin == daemon::LinkOrigin::kRouted) return s;
    return std::nullopt;
  }

  std::string DownReason(uint64_t id) {
    auto why = engine_->Run([&] {
      auto it = down_reasons_.find(id);
      return it == down_reasons_.end() ? std::string() : it->second;
    });
    return why ? *why : std::string();
  }

  RelayStats Stats() {
    auto s = engine_->Run([&] { return engine_->relay_stats(); });
    return s ? *s : RelayStats{};
  }

  // Routes as the membership thread would set them: each host reached
  // through `next_hop`.
  void SetRoutes(const std::map<std::string, std::string>& next_hops,
                 const std::string& instance = kFarInstance) {
    std::map<std::string, Engine::Route> routes;
    for (const auto& [host, next] : next_hops) routes[host] = {next, {next, host}, instance};
    (void)engine_->Run([&] {
      engine_->SetRoutes(kSelfInstance, routes);
      return 0;
    });
  }

  // Sends `envelope` on relay-peer's link and expects that link down with
  // a protocol error naming `what`; the other link is untouched.
  void ExpectProtocolError(const std::string& envelope, const std::string& what) {
    SendRouted(relay_, envelope);
    ASSERT_TRUE(WaitFor([&] { return !Link(relay_.link).has_value(); }))
        << "a malformed envelope must take its link down";
    const std::string why = DownReason(relay_.link);
    EXPECT_NE(why.find("protocol error"), std::string::npos) << why;
    EXPECT_NE(why.find(what), std::string::npos) << why;
    EXPECT_TRUE(Link(next_.link).has_value()) << "only the link it came on goes down";
    RelayStats s = Stats();
    EXPECT_EQ(s.forwarded + s.delivered, 0u);
  }

  // Serves the Control service on the engine and connects a real client.
  Client* StartControl() {
    control_ = std::make_unique<daemon::ControlService>(*engine_);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix:" + dir_.Join("rpcd.sock"), grpc::InsecureServerCredentials());
    builder.RegisterService(control_.get());
    server_ = builder.BuildAndStart();
    if (!server_) {
      ADD_FAILURE() << "cannot serve the Control service";
      return nullptr;
    }
    ClientOptions o;
    o.socket = dir_.Join("rpcd.sock");
    o.app_name = "relay-server";
    auto c = Client::Connect(o);
    if (!c.ok()) {
      ADD_FAILURE() << "Connect: " << c.status().ToString();
      return nullptr;
    }
    client_ = std::move(c).value();
    return client_.get();
  }

  TempDir dir_{"mcdma-relay"};
  std::unique_ptr<Engine> engine_;
  driver::Device* link_device_ = nullptr;
  FakePeer relay_{"relay-peer"};
  FakePeer next_{"next-peer"};
  std::map<uint64_t, std::string> down_reasons_;  // engine thread only
  std::unique_ptr<daemon::ControlService> control_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<Client> client_;
};

// Proves the first hop binds the origin to the link's peer: relay-peer
// cannot start an envelope in far-host's name (hops 0), it is dropped and
// counted refused, and the link stays up; the same envelope as a second
// hop (hops 1, relay-peer relaying for far-host) is forwarded.
TEST_F(InprocRelay, AFirstHopNamingAnotherOriginIsRefusedAndTheLinkStaysUp) {
  Envelope e;
  e.hops = 0;
  e.dest = "next-peer";
  e.inner = Inner(MsgType::kEcho, 5, 1);
  e.payload = "spoofed";
  SendRouted(relay_, e.Encode());
  RelayStats s = Stats();
  EXPECT_EQ(s.dropped_refused, 1u);
  EXPECT_EQ(s.forwarded, 0u);
  EXPECT_TRUE(RoutedTo(next_).empty()) << "a refused envelope must not be forwarded";
  ASSERT_TRUE(Link(relay_.link).has_value()) << DownReason(relay_.link);
  EXPECT_TRUE(EchoWorks(relay_));

  e.hops = 1;
  SendRouted(relay_, e.Encode());
  ASSERT_TRUE(WaitFor([&] { return !RoutedTo(next_).empty(); }));
  EXPECT_EQ(Stats().forwarded, 1u);
  EXPECT_EQ(Stats().dropped_refused, 1u);
}

// Proves the hop limit: an envelope that crossed kMaxHops - 2 links before
// this one is forwarded with its hop count raised (whole otherwise), and
// one that crossed kMaxHops - 1 (a fifth link would be next) is dropped,
// counted hop_limit, with the link left up.
TEST_F(InprocRelay, AnEnvelopeAtTheHopLimitIsDroppedAndTheLinkStaysUp) {
  Envelope e;
  e.dest = "next-peer";
  e.inner = Inner(MsgType::kEcho, 6, 1);
  e.payload = "far away";
  e.hops = route_wire::kMaxHops - 2;
  SendRouted(relay_, e.Encode());
  ASSERT_TRUE(WaitFor([&] { return RoutedTo(next_).size() == 1; }));
  Routed fwd = RoutedTo(next_)[0];
  EXPECT_EQ(fwd.hops, route_wire::kMaxHops - 1);
  EXPECT_EQ(fwd.origin, kFar);
  EXPECT_EQ(fwd.dest, "next-peer");
  EXPECT_EQ(fwd.inner.type, MsgType::kEcho);
  EXPECT_EQ(fwd.inner.id, 6u);
  EXPECT_EQ(fwd.payload, "far away");

  e.hops = route_wire::kMaxHops - 1;
  SendRouted(relay_, e.Encode());
  RelayStats s = Stats();
  EXPECT_EQ(s.dropped_hop_limit, 1u);
  EXPECT_EQ(s.forwarded, 1u);
  EXPECT_EQ(RoutedTo(next_).size(), 1u) << "an envelope past the hop limit must not go on";
  ASSERT_TRUE(Link(relay_.link).has_value()) << DownReason(relay_.link);
  EXPECT_TRUE(EchoWorks(relay_));
}

// Proves a relay forwards only where it has a link or a route: with
// neither for "nowhere-host" the envelope is dropped and counted no_route
// (the link stays up); once a route via next-peer is set, the same
// envelope is forwarded to next-peer.
TEST_F(InprocRelay, AnEnvelopeWithNoLinkAndNoRouteHereIsDropped) {
  Envelope e;
  e.dest = "nowhere-host";
  e.inner = Inner(MsgType::kEcho, 7, 1);
  SendRouted(relay_, e.Encode());
  RelayStats s = Stats();
  EXPECT_EQ(s.dropped_no_route, 1u);
  EXPECT_EQ(s.forwarded, 0u);
  ASSERT_TRUE(Link(relay_.link).has_value()) << DownReason(relay_.link);
  EXPECT_TRUE(EchoWorks(relay_));

  SetRoutes({{"nowhere-host", "next-peer"}});
  SendRouted(relay_, e.Encode());
  ASSERT_TRUE(WaitFor([&] { return RoutedTo(next_).size() == 1; }));
  EXPECT_EQ(RoutedTo(next_)[0].dest, "nowhere-host");
  EXPECT_EQ(Stats().dropped_no_route, 1u);
  EXPECT_EQ(Stats().forwarded, 1u);
}

// Proves a truncated envelope (shorter than its route header) takes the
// link it came on down as a protocol error.
TEST_F(InprocRelay, ATruncatedEnvelopeTakesTheLinkDown) {
  Envelope e;
  e.inner = Inner(MsgType::kEcho, 8, 1);
  e.payload = "cut";
  std::string env = e.Encode();
  env.resize(route_wire::kFixedBytes + 4);  // the host ids cut off, no inner header
  ExpectProtocolError(env, "shorter than its route header");
}

// Proves an envelope whose inner header announces more payload than the
// envelope carries takes the link down as a protocol error.
TEST_F(InprocRelay, AnInnerLengthThatDoesNotMatchTakesTheLinkDown) {
  Envelope e;
  e.inner = Inner(MsgType::kEcho, 9, 1);
  e.payload = "four";
  std::string env = e.Encode();
  env.resize(env.size() - 2);  // the inner total_len still says 4
  ExpectProtocolError(env, "inner length is not the rest of its payload");
}

// Proves a kRouted message inside an envelope (never routed) takes the link
// down as a protocol error, even in an envelope only passing through (for
// next-peer).
TEST_F(InprocRelay, ANestedRoutedMessageTakesTheLinkDown) {
  Envelope inside;
  inside.inner = Inner(MsgType::kEcho, 10, 1);
  Envelope e;
  e.dest = "next-peer";
  e.inner = Inner(MsgType::kRouted, 0, 1);
  e.payload = inside.Encode();
  ExpectProtocolError(e.Encode(), "never routed");
}

// Proves routed delivery end to end at the destination: a CALL from
// far-host (relayed once by relay-peer) reaches the service a local app
// serves, and its REPLY goes back as an envelope on relay-peer's link (the
// route's next hop) from this host to far-host, the same call id, the
// app's bytes, acknowledging the call, and answering far-host's routed
// link (its epoch as the ack epoch).
TEST_F(InprocRelay, ARoutedCallReachesTheServiceAndItsReplyGoesBackRouted) {
  Client* server = StartControl();
  ASSERT_NE(server, nullptr);
  auto served = server->Serve("upper", [](ServerCall& call) {
    std::string reply(call.view());
    for (char& c : reply) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    (void)call.Reply(reply);
  });
  ASSERT_TRUE(served.ok()) << served.status().ToString();
  auto service = engine_->Run([&] { return engine_->LookupForPeer("upper"); });
  ASSERT_TRUE(service && service->ok());
  SetRoutes({{kFar, "relay-peer"}});

  Envelope e;
  e.hops = 1;
  e.sender_epoch = 5;
  e.inner = Inner(MsgType::kCall, 77, 1);
  e.inner.target = service->value();
  e.inner.timeout_us = 5'000'000;
  e.payload = "routed ping";
  SendRouted(relay_, e.Encode());
  ASSERT_TRUE(WaitFor([&] { return !RoutedOfType(relay_, MsgType::kReply).empty(); }))
      << "no routed reply; links down: " << DownReason(relay_.link);

  const Routed reply = RoutedOfType(relay_, MsgType::kReply)[0];
  EXPECT_EQ(reply.hops, 0u);
  EXPECT_EQ(reply.origin, kSelf);
  EXPECT_EQ(reply.dest, kFar);
  EXPECT_EQ(reply.origin_instance, kSelfInstance);
  EXPECT_EQ(reply.dest_instance, kFarInstance);
  EXPECT_NE(reply.sender_epoch, 0u);
  EXPECT_EQ(reply.ack_epoch, 5u);
  EXPECT_EQ(reply.inner.id, 77u);
  EXPECT_EQ(reply.inner.status, static_cast<uint16_t>(Code::kOk));
  EXPECT_EQ(reply.inner.seq, 1u);
  EXPECT_EQ(reply.inner.ack, 1u) << "the reply acknowledges the call";
  EXPECT_EQ(reply.payload, "ROUTED PING");
  EXPECT_TRUE(RoutedTo(next_).empty()) << "the reply goes to the route's next hop only";

  RelayStats s = Stats();
  EXPECT_EQ(s.delivered, 1u);
  EXPECT_EQ(s.forwarded, 0u);
  ASSERT_EQ(s.routed.size(), 1u);
  EXPECT_EQ(s.routed[0].peer, kFar);
  EXPECT_EQ(s.routed[0].next_hop, "relay-peer");
  EXPECT_EQ(s.routed[0].calls_in, 1u);
  EXPECT_TRUE(Link(relay_.link).has_value()) << DownReason(relay_.link);
}

// Proves a routed link delivers once and never across epochs: the same
// inner message sent twice (a resend) is dispatched once and counted a
// duplicate; after epoch 7 was seen, an envelope of epoch 6 is dropped as
// stale (not dispatched), while epoch 7 goes on with its next message.
TEST_F(InprocRelay, DuplicatesAreDeliveredOnceAndAnOlderEpochIsDropped) {
  SetRoutes({{kFar, "relay-peer"}});
  Envelope e;
  e.sender_epoch = 7;
  e.inner = Inner(MsgType::kEcho, 21, 1);
  e.payload = "first";
  SendRouted(relay_, e.Encode());
  SendRouted(relay_, e.Encode());  // sent again by far-host: the same seq
  ASSERT_TRUE(WaitFor([&] { return !RoutedOfType(relay_, MsgType::kEchoReply).empty(); }));
  Collect();
  auto echoes = RoutedOfType(relay_, MsgType::kEchoReply);
  ASSERT_EQ(echoes.size(), 1u) << "the echo was dispatched more than once";
  EXPECT_EQ(echoes[0].inner.id, 21u);
  EXPECT_EQ(echoes[0].payload, "first");
  EXPECT_EQ(echoes[0].ack_epoch, 7u);
  auto routed = RoutedLink(kFar);
  ASSERT_TRUE(routed.has_value());
  EXPECT_EQ(routed->duplicates, 1u);
  EXPECT_EQ(Stats().dropped_stale, 0u);

  Envelope old = e;
  old.sender_epoch = 6;
  old.inner = Inner(MsgType::kEcho, 22, 2);
  old.payload = "stale";
  SendRouted(relay_, old.Encode());
  EXPECT_EQ(Stats().dropped_stale, 1u);

  e.inner = Inner(MsgType::kEcho, 23, 2);
  e.payload = "second";
  SendRouted(relay_, e.Encode());
  ASSERT_TRUE(WaitFor([&] { return RoutedOfType(relay_, MsgType::kEchoReply).size() == 2; }));
  Collect();
  echoes = RoutedOfType(relay_, MsgType::kEchoReply);
  ASSERT_EQ(echoes.size(), 2u);
  EXPECT_EQ(echoes[1].inner.id, 23u) << "the stale message must not be dispatched";
  EXPECT_EQ(echoes[1].payload, "second");
  RelayStats s = Stats();
  EXPECT_EQ(s.dropped_stale, 1u);
  EXPECT_TRUE(Link(relay_.link).has_value()) << DownReason(relay_.link);
}

// Proves routed pieces are checked at the export's host against the
// origin host, not against whoever relayed them: far-host's WRITE to an
// export granted to "other-host" only is answered PERMISSION_DENIED and
// leaves the memory as it was; once granted to far-host, its WRITE lands
// byte for byte and its READ answers the bytes; a piece past the end is
// OUT_OF_RANGE; a piece whose length is not its bytes takes the routed
// link down (a protocol error) while relay-peer's own link stays up.
TEST_F(InprocRelay, RoutedPiecesAreCheckedAgainstTheOriginHost) {
  Client* owner = StartControl();
  ASSERT_NE(owner, nullptr);
  auto buf = owner->Alloc(1 << 20);
  ASSERT_TRUE(buf.ok()) << buf.status().ToString();
  std::memset(buf->data(), 0x11, buf->size());
  ExportOptions only_other;
  only_other.allow_read = true;
  only_other.allow_write = true;
  only_other.allowed_peers = {"other-host"};
  ASSERT_TRUE(owner->Export(*buf, "kv", only_other).ok());
  ExportOptions for_far = only_other;
  for_far.allowed_peers = {kFar};
  ASSERT_TRUE(owner->Export(*buf, "kv-far", for_far).ok());
  auto exports = engine_->Run([&] { return engine_->ExportsNow(); });
  ASSERT_TRUE(exports.has_value());
  std::map<std::string, uint64_t> ids;
  for (const auto& e : *exports) ids[e.name] = e.export_id;
  SetRoutes({{kFar, "relay-peer"}});

  uint64_t seq = 0;
  auto piece = [&](route_wire::PieceKind kind, uint64_t export_id, uint64_t offset, uint64_t length,
                   const std::string& bytes) {
    Envelope e;
    e.sender_epoch = 3;
    e.inner = Inner(MsgType::kPiece, 100 + seq, seq + 1);
    e.inner.target = export_id;
    ++seq;
    std::string head(route_wire::kPieceHeadBytes, '\0');
    route_wire::EncodePieceHead({kind, offset, length}, reinterpret_cast<std::byte*>(head.data()));
    e.payload = head + bytes;
    SendRouted(relay_, e.Encode());
  };
  auto replies = [&] { return RoutedOfType(relay_, MsgType::kPieceReply); };
  const std::string data(2048, '\x5a');

  piece(route_wire::PieceKind::kWrite, ids["kv"], 0, data.size(), data);
  ASSERT_TRUE(WaitFor([&] { return replies().size() == 1; })) << DownReason(relay_.link);
  EXPECT_EQ(replies()[0].inner.status, static_cast<uint16_t>(Code::kPermissionDenied));
  EXPECT_NE(replies()[0].payload.find("not granted to host 'far-host'"), std::string::npos)
      << replies()[0].payload;
  EXPECT_EQ(std::to_integer<uint8_t>(buf->data()[0]), 0x11) << "a refused write changed memory";

  piece(route_wire::PieceKind::kWrite, ids["kv-far"], 8192, data.size(), data);
  ASSERT_TRUE(WaitFor([&] { return replies().size() == 2; }));
  EXPECT_EQ(replies()[1].inner.status, static_cast<uint16_t>(Code::kOk));
  EXPECT_EQ(replies()[1].inner.id, 101u);
  EXPECT_EQ(replies()[1].payload.size(), route_wire::kPieceHeadBytes);
  EXPECT_EQ(std::memcmp(buf->data() + 8192, data.data(), data.size()), 0);
  EXPECT_EQ(std::to_integer<uint8_t>(buf->data()[8191]), 0x11);

  piece(route_wire::PieceKind::kRead, ids["kv-far"], 8190, 8, "");
  ASSERT_TRUE(WaitFor([&] { return replies().size() == 3; }));
  EXPECT_EQ(replies()[2].inner.status, static_cast<uint16_t>(Code::kOk));
  EXPECT_EQ(replies()[2].payload.substr(route_wire::kPieceHeadBytes),
            std::string("\x11\x11\x5a\x5a\x5a\x5a\x5a\x5a"));

  piece(route_wire::PieceKind::kRead, ids["kv-far"], (1 << 20) - 4, 8, "");
  ASSERT_TRUE(WaitFor([&] { return replies().size() == 4; }));
  EXPECT_EQ(replies()[3].inner.status, static_cast<uint16_t>(Code::kOutOfRange));

  // A WRITE head that claims more bytes than it carries.
  piece(route_wire::PieceKind::kWrite, ids["kv-far"], 0, 64, "short");
  ASSERT_TRUE(WaitFor([&] { return !RoutedLink(kFar).has_value(); }))
      << "a malformed piece must take the routed link down";
  EXPECT_TRUE(Link(relay_.link).has_value()) << "relay-peer's own link stays up";
  EXPECT_TRUE(EchoWorks(relay_));
}

}  // namespace mcdma::itest::inproc_relay
