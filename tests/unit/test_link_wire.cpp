// The data-link message header, the peering options and the small address
// helpers of the peer plane.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <string>

#include "config/options.hpp"
#include "driver/tcp/tcp_transport.hpp"
#include "engine/link_wire.hpp"
#include "peer/peer_util.hpp"

namespace mcdma::daemon {
namespace {

using link_wire::Header;
using link_wire::MsgType;

TEST(LinkWire, RoundTripsEveryField) {
  Header h;
  h.type = MsgType::kReply;
  h.status = 9;
  h.total_len = 100;
  h.frag_off = 60;
  h.id = 0x0102030405060708ULL;
  h.target = 0xfffefdfcfbfaf9f8ULL;
  h.timeout_us = 123456;
  h.reason = 2;
  h.seq = 0x1112131415161718ULL;
  h.ack = 0x2122232425262728ULL;
  std::array<std::byte, 100> buf{};
  link_wire::Encode(h, buf.data());
  // Little-endian on the wire: the magic reads "MCDL".
  EXPECT_EQ(std::to_integer<char>(buf[0]), 'M');
  EXPECT_EQ(std::to_integer<char>(buf[3]), 'L');
  EXPECT_EQ(std::to_integer<uint8_t>(buf[16]), 0x08);
  std::string why;
  auto d = link_wire::Decode(buf.data(), link_wire::kHeaderBytes + 40, &why);
  ASSERT_TRUE(d.has_value()) << why;
  EXPECT_EQ(d->type, MsgType::kReply);
  EXPECT_EQ(d->status, 9);
  EXPECT_EQ(d->total_len, 100u);
  EXPECT_EQ(d->frag_off, 60u);
  EXPECT_EQ(d->id, h.id);
  EXPECT_EQ(d->target, h.target);
  EXPECT_EQ(d->timeout_us, 123456u);
  EXPECT_EQ(d->reason, 2u);
  EXPECT_EQ(std::to_integer<uint8_t>(buf[36]), 2) << "the reason is the word at offset 36";
  EXPECT_EQ(d->seq, h.seq);
  EXPECT_EQ(d->ack, h.ack);
  EXPECT_EQ(std::to_integer<uint8_t>(buf[40]), 0x18) << "the sequence number is at offset 40";
  EXPECT_EQ(std::to_integer<uint8_t>(buf[48]), 0x28) << "the ack is at offset 48";
}

std::string DecodeError(const Header& h, size_t len) {
  std::array<std::byte, 160> buf{};
  link_wire::Encode(h, buf.data());
  std::string why;
  auto d = link_wire::Decode(buf.data(), len, &why);
  return d ? std::string("accepted") : why;
}

TEST(LinkWire, RefusesWhatBreaksTheRules) {
  Header ok;
  ok.total_len = 10;
  ok.seq = 1;
  EXPECT_EQ(DecodeError(ok, link_wire::kHeaderBytes + 10), "accepted");
  EXPECT_NE(DecodeError(ok, link_wire::kHeaderBytes - 1).find("shorter than the header"),
            std::string::npos);
  Header bad = ok;
  bad.magic = 0x12345678;
  EXPECT_EQ(DecodeError(bad, link_wire::kHeaderBytes + 10), "bad magic");
  bad = ok;
  bad.version = 1;  // the 40-byte header without sequence numbers
  EXPECT_NE(DecodeError(bad, link_wire::kHeaderBytes + 10).find("version 1"), std::string::npos);
  bad = ok;
  bad.type = static_cast<MsgType>(0);
  EXPECT_NE(DecodeError(bad, link_wire::kHeaderBytes + 10).find("unknown message type 0"),
            std::string::npos);
  bad.type = static_cast<MsgType>(18);
  EXPECT_NE(DecodeError(bad, link_wire::kHeaderBytes + 10).find("unknown message type 18"),
            std::string::npos);
  bad.type = MsgType::kRevokeAck;
  EXPECT_EQ(DecodeError(bad, link_wire::kHeaderBytes + 10), "accepted");
  // Every message but an ack has a sequence number; an ack has none and no payload.
  bad = ok;
  bad.seq = 0;
  EXPECT_NE(DecodeError(bad, link_wire::kHeaderBytes + 10).find("without a sequence number"),
            std::string::npos);
  Header ack;
  ack.type = MsgType::kAck;
  ack.ack = 7;
  EXPECT_EQ(DecodeError(ack, link_wire::kHeaderBytes), "accepted");
  ack.seq = 3;
  EXPECT_NE(
      DecodeError(ack, link_wire::kHeaderBytes).find("an ack or probe with a sequence number"),
      std::string::npos);
  ack.seq = 0;
  ack.total_len = 4;
  EXPECT_NE(DecodeError(ack, link_wire::kHeaderBytes + 4).find("an ack or probe with a payload"),
            std::string::npos);
  // Rail probes are like acks: outside the sequence, header only.
  for (MsgType probe : {MsgType::kRailProbe, MsgType::kRailProbeAck}) {
    Header p;
    p.type = probe;
    EXPECT_EQ(DecodeError(p, link_wire::kHeaderBytes), "accepted");
    p.seq = 1;
    EXPECT_NE(DecodeError(p, link_wire::kHeaderBytes).find("with a sequence number"),
              std::string::npos);
  }
  bad = ok;
  bad.total_len = link_wire::kMaxMessageBytes + 1;
  EXPECT_NE(DecodeError(bad, link_wire::kHeaderBytes).find("over the limit"), std::string::npos);
  // A fragment longer than what is left of its message.
  EXPECT_NE(DecodeError(ok, link_wire::kHeaderBytes + 11).find("runs past"), std::string::npos);
  bad = ok;
  bad.frag_off = 8;
  EXPECT_NE(DecodeError(bad, link_wire::kHeaderBytes + 3).find("runs past"), std::string::npos);
  EXPECT_EQ(DecodeError(bad, link_wire::kHeaderBytes + 2), "accepted");
  // Only an empty message may have an empty fragment.
  EXPECT_NE(DecodeError(ok, link_wire::kHeaderBytes).find("empty fragment"), std::string::npos);
  Header empty;
  empty.seq = 2;
  EXPECT_EQ(DecodeError(empty, link_wire::kHeaderBytes), "accepted");
}

TEST(PeerOptions, SplitsHostAndPort) {
  auto a = SplitHostPort("10.0.0.1:7000", 7471);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->first, "10.0.0.1");
  EXPECT_EQ(a->second, 7000);
  auto b = SplitHostPort("spark-1", 7471);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->first, "spark-1");
  EXPECT_EQ(b->second, 7471);
  auto c = SplitHostPort("[fe80::1]:9", 7471);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->first, "fe80::1");
  EXPECT_EQ(c->second, 9);
  for (const char* bad :
       {"", ":7000", "host:", "host:70000", "host:x1", "fe80::1", "[::1", "[::1]x", "a b:1"}) {
    EXPECT_FALSE(SplitHostPort(bad, 7471).ok()) << bad;
  }
}

TEST(PeerOptions, ValidatesPeerEntries) {
  PeerConfig p{"host-b", "10.0.0.2", "auto"};
  EXPECT_TRUE(ValidatePeer(p, "peer[0]").ok());
  p.transport = "rdma";
  Status st = ValidatePeer(p, "peer[0]");
  EXPECT_EQ(st.code(), Code::kInvalid);
  EXPECT_NE(st.message().find("peer[0].transport"), std::string::npos);
  p = {"has space", "10.0.0.2", "tcp"};
  EXPECT_NE(ValidatePeer(p, "peer[1]").message().find("peer[1].name"), std::string::npos);
  p = {"host-b", "", "tcp"};
  EXPECT_NE(ValidatePeer(p, "peer[2]").message().find("peer[2].address"), std::string::npos);
}

class TomlPeers : public ::testing::Test {
 protected:
  std::string Write(const std::string& text) {
    std::string path = ::testing::TempDir() + "/peers_test.toml";
    std::ofstream(path) << text;
    return path;
  }
};

TEST_F(TomlPeers, LoadsPeerTablesAndLinkKeys) {
  Options o;
  o.host_id = "host-a";
  std::string path = Write(
      "fabric_key = \"/etc/mcdma/fabric.key\"\n"
      "listen = \"10.0.0.1:7000\"\n"
      "[link]\nheartbeat_ms = 200\ntimeout_ms = 1000\n"
      "[[peer]]\nname = \"host-b\"\naddress = \"10.0.0.2\"\n"
      "[[peer]]\nname = \"host-c\"\naddress = \"10.0.0.3:7001\"\ntransport = \"tcp\"\n");
  ASSERT_TRUE(LoadTomlFile(path, o).ok());
  ASSERT_EQ(o.peers.size(), 2u);
  EXPECT_EQ(o.peers[0].name, "host-b");
  EXPECT_EQ(o.peers[0].transport, "auto");
  EXPECT_EQ(o.peers[1].address, "10.0.0.3:7001");
  EXPECT_EQ(o.peers[1].transport, "tcp");
  EXPECT_EQ(o.heartbeat_ms, 200u);
  EXPECT_EQ(o.link_timeout_ms, 1000u);
  EXPECT_EQ(o.listen, "10.0.0.1:7000");
  EXPECT_TRUE(Validate(o).ok());
}

TEST_F(TomlPeers, NamesTheBadKey) {
  Options o;
  Status st = LoadTomlFile(Write("[[peer]]\nname = \"b\"\nadress = \"x\"\n"), o);
  EXPECT_EQ(st.code(), Code::kInvalid);
  EXPECT_NE(st.message().find("peer[0].adress: unknown configuration key"), std::string::npos);
}

TEST_F(TomlPeers, RefusesInconsistentPeering) {
  Options o;
  o.host_id = "host-a";
  o.peers.push_back({"host-b", "10.0.0.2", "auto"});
  Status st = Validate(o);
  EXPECT_NE(st.message().find("fabric_key: required"), std::string::npos) << st.message();
  o.fabric_key = "/k";
  o.peers.push_back({"host-b", "10.0.0.3", "auto"});
  EXPECT_NE(Validate(o).message().find("listed twice"), std::string::npos);
  o.peers = {{"host-a", "10.0.0.3", "auto"}};
  EXPECT_NE(Validate(o).message().find("this host's own id"), std::string::npos);
  o.peers.clear();
  o.heartbeat_ms = 1000;
  o.link_timeout_ms = 1500;
  EXPECT_NE(Validate(o).message().find("link.timeout_ms"), std::string::npos);
  o.link_timeout_ms = 3000;
  o.tls_cert = "/c.pem";
  EXPECT_NE(Validate(o).message().find("tls.cert and tls.key"), std::string::npos);
  o.tls_key = "/k.pem";
  EXPECT_NE(Validate(o).message().find("tls.ca"), std::string::npos);
}

TEST(PeerUtil, ReadsTheIpOfAGrpcPeer) {
  EXPECT_EQ(IpOfGrpcPeer("ipv4:10.240.3.1:51234"), "10.240.3.1");
  EXPECT_EQ(IpOfGrpcPeer("ipv6:[::1]:7000"), "::1");
  EXPECT_EQ(IpOfGrpcPeer("ipv6:%5B::1%5D:7000"), "::1");
  EXPECT_EQ(IpOfGrpcPeer("unix:/run/x.sock"), "");
  EXPECT_EQ(JoinHostPort("::1", 7), "[::1]:7");
  EXPECT_EQ(JoinHostPort("10.0.0.1", 7), "10.0.0.1:7");
}

TEST(PeerUtil, RebasesOnlyWildcardEndpoints) {
  const std::string token(32, 'a');
  auto r = driver::tcp::RebaseEndpointInfo("tcp1 0.0.0.0 4000 " + token, "10.240.3.2");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, "tcp1 10.240.3.2 4000 " + token);
  auto same = driver::tcp::RebaseEndpointInfo("tcp1 10.0.0.9 4000 " + token, "10.240.3.2");
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(*same, "tcp1 10.0.0.9 4000 " + token);
  EXPECT_FALSE(driver::tcp::RebaseEndpointInfo("garbage", "10.0.0.1").ok());
  EXPECT_FALSE(driver::tcp::RebaseEndpointInfo("tcp1 :: 4000 " + token, "a b").ok());
}

}  // namespace
}  // namespace mcdma::daemon
