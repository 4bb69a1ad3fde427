// The verbs transport's wire formats (driver/verbs/verbs_wire.hpp): the
// endpoint description both ends exchange and the header of every SEND.
#include <gtest/gtest.h>

#include <array>

#include "driver/verbs/verbs_wire.hpp"

namespace v = mcdma::driver::verbs;
using mcdma::Code;

namespace {

v::EndpointInfo Sample() {
  v::EndpointInfo e;
  e.unreliable = true;
  e.profile = "apple-tb5";
  e.device = "rxe1";
  e.qpn = 0x123456;
  e.psn = 0xabcdef;
  e.gid = std::string("\0\0\0\0\0\0\0\0\0\0\xff\xff\x0a\x00\x01\x01", 16);
  e.mtu = 1024;
  e.slot_bytes = 4096;
  e.depth = 32;
  e.max_outstanding = 1024;
  e.max_reads = 0;
  e.max_read_bytes = 0;
  e.max_transfer_bytes = 0xfa0000;
  return e;
}

TEST(VerbsWire, EndpointRoundTrips) {
  v::EndpointInfo e = Sample();
  std::string bytes = v::EncodeEndpoint(e);
  auto back = v::DecodeEndpoint(bytes);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_TRUE(back->unreliable);
  EXPECT_EQ(back->profile, "apple-tb5");
  EXPECT_EQ(back->device, "rxe1");
  EXPECT_EQ(back->qpn, 0x123456u);
  EXPECT_EQ(back->psn, 0xabcdefu);
  EXPECT_EQ(back->gid, e.gid);
  EXPECT_EQ(back->mtu, 1024u);
  EXPECT_EQ(back->slot_bytes, 4096u);
  EXPECT_EQ(back->depth, 32u);
  EXPECT_EQ(back->max_outstanding, 1024u);
  EXPECT_EQ(back->max_transfer_bytes, 0xfa0000u);
}

TEST(VerbsWire, EndpointRejectsDamage) {
  std::string good = v::EncodeEndpoint(Sample());
  // Every truncation is refused, never read past the end.
  for (size_t n = 0; n < good.size(); ++n) {
    auto r = v::DecodeEndpoint(std::string_view(good).substr(0, n));
    EXPECT_FALSE(r.ok()) << "accepted " << n << " of " << good.size() << " bytes";
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), Code::kInvalid);
    }
  }
  EXPECT_NE(v::DecodeEndpoint(good + "x").status().message().find("trailing"), std::string::npos);
  std::string magic = good;
  magic[0] = 'X';
  EXPECT_NE(v::DecodeEndpoint(magic).status().message().find("magic"), std::string::npos);
  std::string version = good;
  version[4] = 9;
  EXPECT_NE(v::DecodeEndpoint(version).status().message().find("version 9"), std::string::npos);
  v::EndpointInfo wide = Sample();
  wide.psn = 0x1000000;
  EXPECT_NE(v::DecodeEndpoint(v::EncodeEndpoint(wide)).status().message().find("24 bits"),
            std::string::npos);
  v::EndpointInfo tiny = Sample();
  tiny.slot_bytes = 16;
  EXPECT_FALSE(v::DecodeEndpoint(v::EncodeEndpoint(tiny)).ok());
}

TEST(VerbsWire, HeaderRoundTripsAndChecksLength) {
  std::array<std::byte, v::kWireHeaderBytes + 8> buf{};
  v::EncodeHeader({v::WireType::kData, 0, 0xfffffffe, 8}, buf.data());
  auto h = v::DecodeHeader(buf.data(), static_cast<uint32_t>(buf.size()));
  ASSERT_TRUE(h.ok()) << h.status().message();
  EXPECT_EQ(h->type, v::WireType::kData);
  EXPECT_EQ(h->posted, 0xfffffffeu);
  EXPECT_EQ(h->length, 8u);
  // The header claims more than arrived.
  auto short_recv = v::DecodeHeader(buf.data(), v::kWireHeaderBytes + 7);
  EXPECT_EQ(short_recv.status().code(), Code::kInvalid);
  EXPECT_FALSE(v::DecodeHeader(buf.data(), 15).ok());
  buf[0] = std::byte{9};
  EXPECT_NE(v::DecodeHeader(buf.data(), v::kWireHeaderBytes).status().message().find("type 9"),
            std::string::npos);
  // Control messages carry no payload.
  v::EncodeHeader({v::WireType::kCredit, 0, 5, 3}, buf.data());
  EXPECT_FALSE(v::DecodeHeader(buf.data(), static_cast<uint32_t>(buf.size())).ok());
  v::EncodeHeader({v::WireType::kHello, v::kFlagSeenPeer, 32, 0}, buf.data());
  auto hello = v::DecodeHeader(buf.data(), v::kWireHeaderBytes);
  ASSERT_TRUE(hello.ok());
  EXPECT_EQ(hello->flags, v::kFlagSeenPeer);
  EXPECT_EQ(hello->posted, 32u);
}

TEST(VerbsWire, StreamedOperationsCarryTheirOpHeader) {
  std::array<std::byte, v::kWireHeaderBytes + v::kOpHeaderBytes + 8> buf{};
  v::EncodeHeader({v::WireType::kWriteData, 0, 7, v::kOpHeaderBytes + 8}, buf.data());
  v::EncodeOp({0x01020304, 0xabcdef01, 0x7f0011223344, 4096, 1u << 22, 0},
              buf.data() + v::kWireHeaderBytes);
  auto h = v::DecodeHeader(buf.data(), static_cast<uint32_t>(buf.size()));
  ASSERT_TRUE(h.ok()) << h.status().message();
  EXPECT_EQ(h->type, v::WireType::kWriteData);
  v::OpHeader op = v::DecodeOp(buf.data() + v::kWireHeaderBytes);
  EXPECT_EQ(op.op_id, 0x01020304u);
  EXPECT_EQ(op.rkey, 0xabcdef01u);
  EXPECT_EQ(op.addr, 0x7f0011223344u);
  EXPECT_EQ(op.offset, 4096u);
  EXPECT_EQ(op.total, 1u << 22);
  EXPECT_EQ(op.status, 0u);
  // A streamed message too short for its operation header is refused.
  v::EncodeHeader({v::WireType::kReadReq, 0, 7, 8}, buf.data());
  auto short_op = v::DecodeHeader(buf.data(), static_cast<uint32_t>(buf.size()));
  ASSERT_FALSE(short_op.ok());
  EXPECT_NE(short_op.status().message().find("operation header"), std::string::npos);
}

}  // namespace
