// A link's messages are delivered once and in order whatever rail carried
// them (protocol.md §15.6): an engine in this process with a link whose
// other end is a raw connection the test drives fragment by fragment, as a
// peer daemon's engine would after a rail failed (a message sent again, one
// ahead of its turn). ECHO messages make the engine answer, so the order it
// dispatched them in is the order of its ECHO_REPLYs. Both ends are loop
// connections (they progress when polled), so every step is deterministic.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "daemon.hpp"
#include "driver/loop/loop_transport.hpp"
#include "engine/engine.hpp"
#include "engine/link_wire.hpp"

namespace mcdma::daemon {
namespace {

constexpr uint32_t kSlotBytes = 4096;
constexpr uint32_t kPeerRecvs = 16;

struct Reply {
  link_wire::Header header;
  std::string payload;
};

class LinkSequence : public ::testing::Test {
 protected:
  void SetUp() override {
    SetUpLogging("off");
    Options options;
    options.spin_budget_us = 0;
    options.link_recv_slots = 8;
    options.link_slot_bytes = kSlotBytes;
    options.host_id = "seq-host";
    auto loop = driver::loop::CreateLoopDevice();
    auto link = driver::loop::CreateLoopDevice();
    ASSERT_TRUE(loop.ok() && link.ok());
    peer_device_ = link->get();
    engine_ = std::make_unique<Engine>(
        options, Engine::Devices{std::move(*loop), std::move(*link), nullptr});
    ASSERT_TRUE(engine_->Start().ok());
    auto ok = engine_->Run([&] {
      engine_->SetLinkDownHandler([this](uint64_t, const std::string& why) { down_reason_ = why; });
      auto ours = engine_->CreateLinkEndpoint(Transport::kTcp);
      auto theirs = peer_device_->CreateEndpoint();
      if (!ours.ok() || !theirs.ok()) return false;
      endpoint_ = std::move(*theirs);
      auto conn = (*ours)->Connect(endpoint_->LocalInfo());
      auto peer_conn = endpoint_->Connect((*ours)->LocalInfo());
      if (!conn.ok() || !peer_conn.ok()) return false;
      peer_ = std::move(*peer_conn);
      auto region = peer_device_->Register(memory_.data(), memory_.size(), driver::kAccessLocal);
      if (!region.ok()) return false;
      region_ = std::move(*region);
      for (uint32_t i = 0; i < kPeerRecvs; ++i) {
        if (!peer_->PostRecv(i, {region_.get(), uint64_t{i} * kSlotBytes, kSlotBytes}).ok())
          return false;
      }
      LinkSpec spec{"seq-peer", LinkOrigin::kOut, 1, "seq-instance", 0, Transport::kTcp};
      auto id = engine_->InstallLink(spec, std::move(*conn));
      if (!id.ok()) return false;
      link_ = *id;
      return true;
    });
    ASSERT_TRUE(ok && *ok);
  }

  void TearDown() override {
    if (engine_) {
      (void)engine_->Run([&] {
        peer_.reset();
        region_.reset();
        endpoint_.reset();
        return 0;
      });
      engine_->Stop();
    }
  }

  // Sends one whole message (one fragment) from the peer's end.
  void Send(link_wire::MsgType type, uint64_t id, uint64_t seq, uint64_t ack,
            const std::string& payload) {
    link_wire::Header h;
    h.type = type;
    h.id = id;
    h.seq = seq;
    h.ack = ack;
    h.total_len = static_cast<uint32_t>(payload.size());
    std::byte* out = memory_.data() + uint64_t{kPeerRecvs} * kSlotBytes;
    link_wire::Encode(h, out);
    std::memcpy(out + link_wire::kHeaderBytes, payload.data(), payload.size());
    auto posted = engine_->Run([&] {
      return peer_->PostSend(1000, {region_.get(), uint64_t{kPeerRecvs} * kSlotBytes,
                                    link_wire::kHeaderBytes + payload.size()});
    });
    ASSERT_TRUE(posted && posted->ok());
    Collect();
  }

  // Lets both ends progress, then takes what the engine sent the peer.
  void Collect() {
    for (int round = 0; round < 4; ++round) {
      (void)engine_->Run([&] {
        driver::WorkCompletion wcs[32];
        size_t n;
        while ((n = peer_->Poll(wcs)) > 0) {
          for (size_t i = 0; i < n; ++i) {
            if (wcs[i].op != driver::WorkOp::kRecv || wcs[i].code != Code::kOk) continue;
            const std::byte* in = memory_.data() + wcs[i].wr_id * kSlotBytes;
            std::string why;
            auto h = link_wire::Decode(in, wcs[i].byte_len, &why);
            EXPECT_TRUE(h.has_value()) << why;
            if (h) {
              received_.push_back(
                  {*h, std::string(reinterpret_cast<const char*>(in) + link_wire::kHeaderBytes,
                                   wcs[i].byte_len - link_wire::kHeaderBytes)});
            }
            (void)peer_->PostRecv(wcs[i].wr_id,
                                  {region_.get(), wcs[i].wr_id * kSlotBytes, kSlotBytes});
          }
        }
        return 0;
      });
    }
  }

  std::vector<Reply> Echoes() const {
    std::vector<Reply> out;
    for (const Reply& r : received_)
      if (r.header.type == link_wire::MsgType::kEchoReply) out.push_back(r);
    return out;
  }

  std::optional<LinkSnapshot> Link() {
    auto links = engine_->Run([&] { return engine_->Links(); });
    if (!links) return std::nullopt;
    for (const LinkSnapshot& s : *links)
      if (s.id == link_) return s;
    return std::nullopt;
  }

  std::unique_ptr<Engine> engine_;
  driver::Device* peer_device_ = nullptr;
  std::unique_ptr<driver::Endpoint> endpoint_;
  std::unique_ptr<driver::Connection> peer_;
  std::vector<std::byte> memory_ = std::vector<std::byte>((kPeerRecvs + 1) * kSlotBytes);
  std::unique_ptr<driver::MemoryRegion> region_;
  uint64_t link_ = 0;
  std::vector<Reply> received_;
  std::string down_reason_;
};

TEST_F(LinkSequence, AMessageSentAgainOrAheadOfItsTurnIsDispatchedOnceInOrder) {
  using link_wire::MsgType;
  Send(MsgType::kEcho, 11, 1, 0, "one");
  Send(MsgType::kEcho, 11, 1, 0, "one");    // sent again after a rail failed
  Send(MsgType::kEcho, 13, 3, 0, "three");  // ahead of its turn: waits
  ASSERT_EQ(Echoes().size(), 1u);
  Send(MsgType::kEcho, 12, 2, 0, "two");  // fills the gap: 2, then 3
  std::vector<Reply> echoes = Echoes();
  ASSERT_EQ(echoes.size(), 3u);
  const char* payloads[] = {"one", "two", "three"};
  uint64_t last_ack = 0;
  for (size_t i = 0; i < echoes.size(); ++i) {
    EXPECT_EQ(echoes[i].header.id, 11 + i);
    EXPECT_EQ(echoes[i].payload, payloads[i]);
    EXPECT_EQ(echoes[i].header.seq, i + 1) << "the engine numbers its own messages from 1";
    EXPECT_GE(echoes[i].header.ack, last_ack) << "acks never go back";
    last_ack = echoes[i].header.ack;
  }
  EXPECT_GE(last_ack, 2u);
  auto link = Link();
  ASSERT_TRUE(link.has_value()) << "the link must stay up: " << down_reason_;
  EXPECT_EQ(link->duplicates, 1u);
  // A later ack of the peer's covers what it received.
  Send(MsgType::kAck, 0, 0, 3, "");
  EXPECT_TRUE(Link().has_value()) << down_reason_;
}

TEST_F(LinkSequence, AnAckOfAMessageNeverSentTakesTheLinkDown) {
  Send(link_wire::MsgType::kEcho, 1, 1, 5, "x");
  EXPECT_FALSE(Link().has_value());
  EXPECT_NE(down_reason_.find("acknowledged message 5"), std::string::npos) << down_reason_;
}

TEST_F(LinkSequence, TooManyMessagesAheadOfTheirTurnTakeTheLinkDown) {
  // Message 1 never comes; 2, 3, ... wait for it, up to the bound.
  for (uint64_t seq = 2; seq <= 1026 && Link().has_value(); ++seq)
    Send(link_wire::MsgType::kEcho, seq, seq, 0, "early");
  EXPECT_FALSE(Link().has_value());
  EXPECT_NE(down_reason_.find("arrived ahead of message 1"), std::string::npos) << down_reason_;
  EXPECT_TRUE(Echoes().empty()) << "nothing ahead of its turn may be dispatched";
}

}  // namespace
}  // namespace mcdma::daemon
