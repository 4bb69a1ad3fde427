// Which transport a link uses and why (daemon/src/peer/transport_choice.hpp):
// every combination of what was asked for in config, what this host has and
// what the peer offers; and the verbs path shown in status, built from both
// ends' endpoint descriptions (driver/verbs/verbs_wire.hpp).
#include <gtest/gtest.h>

#include <string>

#include "driver/verbs/verbs_model.hpp"
#include "driver/verbs/verbs_wire.hpp"
#include "peer/transport_choice.hpp"

namespace d = mcdma::daemon;
namespace vb = mcdma::driver::verbs;
using mcdma::Code;

namespace {

constexpr const char* kPeer = "hostb";

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

d::LocalVerbsInfo NoDevice() {
  d::LocalVerbsInfo l;
  l.available = false;
  l.reason = "no RDMA devices in /sys/class/infiniband";
  return l;
}

d::LocalVerbsInfo Device(const std::string& profile) {
  d::LocalVerbsInfo l;
  l.available = true;
  l.device = "rxe1";
  l.port = 1;
  l.gid_index = 1;
  l.profile = profile;
  l.detected_profile = profile;
  l.active_mtu = 1024;
  return l;
}

d::VerbsOffer Offer(const std::string& profile) { return d::VerbsOffer{true, profile}; }
d::VerbsOffer NoOffer() { return d::VerbsOffer{}; }

// --- requested "tcp" ---------------------------------------------------------

TEST(TransportChoice, TcpAskedForIsTcpWhateverTheDevices) {
  struct Case {
    d::LocalVerbsInfo local;
    d::VerbsOffer remote;
  };
  const Case cases[] = {
      {NoDevice(), NoOffer()},
      {NoDevice(), Offer(vb::kProfileLinuxRc)},
      {Device(vb::kProfileLinuxRc), NoOffer()},
      {Device(vb::kProfileLinuxRc), Offer(vb::kProfileLinuxRc)},
      {Device(vb::kProfileAppleTb5), Offer(vb::kProfileLinuxRc)},
  };
  for (const Case& c : cases) {
    auto r = d::ChooseTransport("tcp", kPeer, c.local, c.remote, true);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->transport, d::Transport::kTcp);
    EXPECT_EQ(r->reason, "tcp asked for in config");
  }
}

TEST(TransportChoice, TcpAskedForFailsWhenThePeerOffersNoTcp) {
  auto r = d::ChooseTransport("tcp", kPeer, Device(vb::kProfileLinuxRc), Offer(vb::kProfileLinuxRc),
                              false);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalid);
  EXPECT_TRUE(Has(r.status().message(), "'hostb'")) << r.status().message();
  EXPECT_TRUE(Has(r.status().message(), "offers no tcp")) << r.status().message();
}

// --- requested "verbs" -------------------------------------------------------

TEST(TransportChoice, VerbsAskedForWithoutALocalDeviceIsRefused) {
  d::LocalVerbsInfo local = NoDevice();
  auto r = d::ChooseTransport("verbs", kPeer, local, Offer(vb::kProfileLinuxRc), true);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalid);
  const std::string& m = r.status().message();
  EXPECT_TRUE(Has(m, "\"verbs\" was asked for")) << m;
  EXPECT_TRUE(Has(m, "this host has no usable RDMA device")) << m;
  EXPECT_TRUE(Has(m, local.reason)) << m;
}

TEST(TransportChoice, VerbsAskedForWhenThePeerOffersNoneIsRefusedNamingThePeer) {
  auto r = d::ChooseTransport("verbs", kPeer, Device(vb::kProfileLinuxRc), NoOffer(), true);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalid);
  const std::string& m = r.status().message();
  EXPECT_TRUE(Has(m, "\"verbs\" was asked for")) << m;
  EXPECT_TRUE(Has(m, "peer 'hostb'")) << m;
  EXPECT_TRUE(Has(m, "offers no verbs")) << m;
}

TEST(TransportChoice, VerbsAskedForBetweenUcAndRcIsRefusedEitherWay) {
  struct Case {
    const char* local;
    const char* remote;
  };
  const Case cases[] = {
      {vb::kProfileAppleTb5, vb::kProfileLinuxRc},
      {vb::kProfileLinuxRc, vb::kProfileAppleTb5},
      {vb::kProfileAppleTb5, vb::kProfileMcdmaCx5},
      {vb::kProfileMcdmaCx5, vb::kProfileAppleTb5},
  };
  for (const Case& c : cases) {
    auto r = d::ChooseTransport("verbs", kPeer, Device(c.local), Offer(c.remote), true);
    ASSERT_FALSE(r.ok()) << c.local << " / " << c.remote;
    EXPECT_EQ(r.status().code(), Code::kInvalid);
    const std::string& m = r.status().message();
    EXPECT_TRUE(Has(m, "UC against RC")) << m;
    EXPECT_TRUE(Has(m, "verbs.profile")) << m;
    EXPECT_TRUE(Has(m, std::string(c.local) + " here")) << m;
    EXPECT_TRUE(Has(m, std::string(c.remote) + " on peer 'hostb'")) << m;
  }
}

TEST(TransportChoice, VerbsAskedForWithBothEndsReadyIsVerbs) {
  auto r = d::ChooseTransport("verbs", kPeer, Device(vb::kProfileLinuxRc),
                              Offer(vb::kProfileLinuxRc), true);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->transport, d::Transport::kVerbs);
  EXPECT_TRUE(Has(r->reason, "verbs asked for in config")) << r->reason;
  EXPECT_TRUE(Has(r->reason, "rxe1")) << r->reason;
  EXPECT_TRUE(Has(r->reason, "profile linux-rc")) << r->reason;
}

TEST(TransportChoice, VerbsNeedsNoTcpFromThePeer) {
  auto r = d::ChooseTransport("verbs", kPeer, Device(vb::kProfileMcdmaCx5),
                              Offer(vb::kProfileLinuxRc), false);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->transport, d::Transport::kVerbs);
  EXPECT_TRUE(Has(r->reason, "profile mcdma-cx5")) << r->reason;
}

TEST(TransportChoice, VerbsAskedForBetweenTwoUcEndsIsVerbs) {
  auto r = d::ChooseTransport("verbs", kPeer, Device(vb::kProfileAppleTb5),
                              Offer(vb::kProfileAppleTb5), true);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->transport, d::Transport::kVerbs);
  EXPECT_TRUE(Has(r->reason, "profile apple-tb5")) << r->reason;
}

// --- requested "auto" --------------------------------------------------------

void ExpectAutoTcp(const mcdma::Result<d::TransportChoice>& r, const std::string& missing) {
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->transport, d::Transport::kTcp);
  EXPECT_EQ(r->reason.rfind("auto: ", 0), 0u) << r->reason;
  EXPECT_TRUE(Has(r->reason, missing)) << r->reason;
  EXPECT_TRUE(Has(r->reason, "using tcp")) << r->reason;
}

TEST(TransportChoice, AutoFallsBackToTcpWithoutALocalDevice) {
  d::LocalVerbsInfo local = NoDevice();
  auto r = d::ChooseTransport("auto", kPeer, local, Offer(vb::kProfileLinuxRc), true);
  ExpectAutoTcp(r, "this host has no usable RDMA device");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(Has(r->reason, local.reason)) << r->reason;
}

TEST(TransportChoice, AutoFallsBackToTcpWhenThePeerOffersNoVerbs) {
  auto r = d::ChooseTransport("auto", kPeer, Device(vb::kProfileLinuxRc), NoOffer(), true);
  ExpectAutoTcp(r, "peer 'hostb' offers no verbs");
}

TEST(TransportChoice, AutoFallsBackToTcpBetweenUcAndRc) {
  auto r = d::ChooseTransport("auto", kPeer, Device(vb::kProfileAppleTb5),
                              Offer(vb::kProfileMcdmaCx5), true);
  ExpectAutoTcp(r, "UC against RC");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(Has(r->reason, "apple-tb5 here")) << r->reason;
  EXPECT_TRUE(Has(r->reason, "mcdma-cx5 on peer 'hostb'")) << r->reason;
}

TEST(TransportChoice, AutoNamesTheLocalLackFirstWhenBothEndsLackADevice) {
  auto r = d::ChooseTransport("auto", kPeer, NoDevice(), NoOffer(), true);
  ExpectAutoTcp(r, "this host has no usable RDMA device");
}

TEST(TransportChoice, AutoCannotFallBackWhenThePeerOffersNoTcp) {
  auto r = d::ChooseTransport("auto", kPeer, NoDevice(), Offer(vb::kProfileLinuxRc), false);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalid);
  EXPECT_TRUE(Has(r.status().message(), "'hostb' offers no tcp")) << r.status().message();
}

// Between compatible profiles "auto" runs the link itself on tcp, the rail
// of last resort, and leaves RDMA to the verbs rails (architecture.md §21);
// only a peer without tcp gets a verbs link.
TEST(TransportChoice, AutoRunsTheLinkOnTcpAndLeavesRdmaToTheRails) {
  struct Case {
    const char* local;
    const char* remote;
  };
  const Case cases[] = {
      {vb::kProfileMcdmaCx5, vb::kProfileLinuxRc},  // both RC
      {vb::kProfileLinuxRc, vb::kProfileMcdmaCx5},
      {vb::kProfileLinuxRc, vb::kProfileLinuxRc},
      {vb::kProfileAppleTb5, vb::kProfileAppleTb5},  // both UC
  };
  for (const Case& c : cases) {
    for (bool tcp : {true, false}) {
      auto r = d::ChooseTransport("auto", kPeer, Device(c.local), Offer(c.remote), tcp);
      ASSERT_TRUE(r.ok()) << c.local << " / " << c.remote << ": " << r.status().ToString();
      EXPECT_EQ(r->transport, tcp ? d::Transport::kTcp : d::Transport::kVerbs);
      EXPECT_EQ(r->reason.rfind("auto: ", 0), 0u) << r->reason;
      EXPECT_TRUE(Has(r->reason, "rxe1")) << r->reason;
      if (tcp) {
        EXPECT_TRUE(Has(r->reason, "RDMA rails over every device pair")) << r->reason;
        EXPECT_TRUE(
            Has(r->reason, std::string("profile ") + c.local + "; peer profile " + c.remote))
            << r->reason;
      } else {
        EXPECT_TRUE(Has(r->reason, std::string("profile ") + c.local + " / " + c.remote))
            << r->reason;
      }
    }
  }
}

// --- DescribeVerbsPath -------------------------------------------------------

std::string Gid(unsigned char last) {
  std::string g(16, '\0');
  g[10] = '\xff';
  g[11] = '\xff';
  g[12] = '\x0a';
  g[13] = '\x00';
  g[14] = '\x01';
  g[15] = static_cast<char>(last);
  return g;
}

vb::EndpointInfo Endpoint(const std::string& profile, const std::string& device, uint32_t qpn,
                          uint32_t mtu, unsigned char gid_last) {
  vb::EndpointInfo e;
  e.unreliable = profile == vb::kProfileAppleTb5;
  e.profile = profile;
  e.device = device;
  e.qpn = qpn;
  e.psn = 0x123456;
  e.gid = Gid(gid_last);
  e.mtu = mtu;
  e.slot_bytes = 4096;
  e.depth = 32;
  e.max_outstanding = 64;
  e.max_transfer_bytes = 1 << 20;
  return e;
}

d::LocalVerbsInfo PathLocal() {
  d::LocalVerbsInfo l = Device(vb::kProfileLinuxRc);
  l.port = 1;
  l.gid_index = 3;
  return l;
}

TEST(TransportChoice, DescribesTheVerbsPathFromBothEnds) {
  std::string local =
      vb::EncodeEndpoint(Endpoint(vb::kProfileLinuxRc, "rxe1", 0x000111, 1024, 0x01));
  std::string remote =
      vb::EncodeEndpoint(Endpoint(vb::kProfileMcdmaCx5, "mlx5_0", 0x00abcd, 4096, 0x02));
  auto p = d::DescribeVerbsPath(PathLocal(), local, remote);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->device(), "rxe1");
  EXPECT_EQ(p->port(), 1u);
  EXPECT_EQ(p->gid_index(), 3u);
  EXPECT_EQ(p->gid(), "0000:0000:0000:0000:0000:ffff:0a00:0101");
  EXPECT_EQ(p->profile(), "mcdma-cx5");  // the stricter end
  EXPECT_EQ(p->local_mtu(), 1024u);
  EXPECT_EQ(p->peer_mtu(), 4096u);
  EXPECT_EQ(p->path_mtu(), 1024u);
  EXPECT_EQ(p->local_qpn(), 0x000111u);
  EXPECT_EQ(p->peer_qpn(), 0x00abcdu);
  EXPECT_EQ(p->peer_device(), "mlx5_0");
  EXPECT_EQ(p->peer_gid(), "0000:0000:0000:0000:0000:ffff:0a00:0102");
}

TEST(TransportChoice, VerbsPathFromTheOtherEndSwapsLocalAndPeer) {
  std::string local =
      vb::EncodeEndpoint(Endpoint(vb::kProfileMcdmaCx5, "mlx5_0", 0x00abcd, 4096, 0x02));
  std::string remote =
      vb::EncodeEndpoint(Endpoint(vb::kProfileLinuxRc, "rxe1", 0x000111, 1024, 0x01));
  auto p = d::DescribeVerbsPath(PathLocal(), local, remote);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->device(), "mlx5_0");
  EXPECT_EQ(p->gid(), "0000:0000:0000:0000:0000:ffff:0a00:0102");
  EXPECT_EQ(p->profile(), "mcdma-cx5");
  EXPECT_EQ(p->local_mtu(), 4096u);
  EXPECT_EQ(p->peer_mtu(), 1024u);
  EXPECT_EQ(p->path_mtu(), 1024u);
  EXPECT_EQ(p->local_qpn(), 0x00abcdu);
  EXPECT_EQ(p->peer_qpn(), 0x000111u);
  EXPECT_EQ(p->peer_device(), "rxe1");
  EXPECT_EQ(p->peer_gid(), "0000:0000:0000:0000:0000:ffff:0a00:0101");
}

TEST(TransportChoice, VerbsPathProfileIsTheStricterOne) {
  struct Case {
    const char* local;
    const char* remote;
    const char* expect;
  };
  const Case cases[] = {
      {vb::kProfileLinuxRc, vb::kProfileLinuxRc, vb::kProfileLinuxRc},
      {vb::kProfileMcdmaCx5, vb::kProfileMcdmaCx5, vb::kProfileMcdmaCx5},
      {vb::kProfileAppleTb5, vb::kProfileAppleTb5, vb::kProfileAppleTb5},
      {vb::kProfileAppleTb5, vb::kProfileMcdmaCx5, vb::kProfileAppleTb5},
      {vb::kProfileMcdmaCx5, vb::kProfileAppleTb5, vb::kProfileAppleTb5},
  };
  for (const Case& c : cases) {
    auto p =
        d::DescribeVerbsPath(PathLocal(), vb::EncodeEndpoint(Endpoint(c.local, "a", 1, 1024, 1)),
                             vb::EncodeEndpoint(Endpoint(c.remote, "b", 2, 1024, 2)));
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    EXPECT_EQ(p->profile(), c.expect) << c.local << " / " << c.remote;
  }
}

TEST(TransportChoice, VerbsPathRefusesMalformedDescriptions) {
  std::string good =
      vb::EncodeEndpoint(Endpoint(vb::kProfileLinuxRc, "rxe1", 0x000111, 1024, 0x01));
  vb::EndpointInfo zero_qpn = Endpoint(vb::kProfileMcdmaCx5, "mlx5_0", 0, 4096, 0x02);
  const std::string bad[] = {
      "", "garbage", good.substr(0, good.size() - 1), good + "x", vb::EncodeEndpoint(zero_qpn),
  };
  for (const std::string& b : bad) {
    auto remote_bad = d::DescribeVerbsPath(PathLocal(), good, b);
    ASSERT_FALSE(remote_bad.ok()) << "accepted a remote of " << b.size() << " bytes";
    EXPECT_EQ(remote_bad.status().code(), Code::kInvalid);
    EXPECT_TRUE(Has(remote_bad.status().message(), "verbs endpoint description"))
        << remote_bad.status().message();
    auto local_bad = d::DescribeVerbsPath(PathLocal(), b, good);
    ASSERT_FALSE(local_bad.ok()) << "accepted a local of " << b.size() << " bytes";
    EXPECT_EQ(local_bad.status().code(), Code::kInvalid);
  }
}

}  // namespace
