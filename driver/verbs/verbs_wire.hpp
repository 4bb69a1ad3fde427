// What two verbs connections tell each other: the endpoint description
// exchanged through the authenticated peer protocol before the QPs connect,
// and the 16-byte header in front of every SEND on the wire. Pure encoding,
// no libibverbs: unit-tested on any host. docs/protocol.md §17 specifies
// both byte by byte.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "mcdma/status.hpp"

namespace mcdma::driver::verbs {

inline constexpr uint16_t kWireVersion = 1;

// The endpoint description (Endpoint::LocalInfo of the verbs transport).
struct EndpointInfo {
  uint16_t version = kWireVersion;
  bool unreliable = false;  // UC (apple-tb5) rather than RC
  std::string profile;      // "linux-rc", "mcdma-cx5", "apple-tb5"
  std::string device;       // "rxe1", for status displays
  uint32_t qpn = 0;
  uint32_t psn = 0;              // 24 bits
  std::string gid;               // 16 raw bytes
  uint32_t mtu = 0;              // active MTU of the port, bytes
  uint32_t slot_bytes = 0;       // each receive slot, header included
  uint32_t depth = 0;            // receive slots posted
  uint32_t max_outstanding = 0;  // the sender's limits, so the connection
  uint32_t max_reads = 0;        // runs at the stricter of both ends
  uint64_t max_read_bytes = 0;
  uint64_t max_transfer_bytes = 0;
};

std::string EncodeEndpoint(const EndpointInfo& info);
// kInvalid naming what is wrong (size, version, field out of range).
Result<EndpointInfo> DecodeEndpoint(std::string_view bytes);

// In front of every SEND. `posted` is the sender's running count of receive
// slots it has posted for DATA and CREDIT messages since the connection
// began (it only grows): the receiver's credits are posted - what it sent.
//
// Profiles without RDMA READ/WRITE (apple-tb5) stream one-sided operations
// as messages the peer's transport applies to its registrations, after the
// same checks a NIC makes: WRITE_DATA chunks then a WRITE_ACK back;
// READ_REQ, answered by READ_DATA chunks. Each carries an OpHeader after
// the wire header.
enum class WireType : uint8_t {
  kHello = 1,
  kCredit = 2,
  kData = 3,
  kWriteData = 4,
  kWriteAck = 5,
  kReadReq = 6,
  kReadData = 7,
};
inline constexpr uint8_t kFlagSeenPeer = 1;  // HELLO: the sender has heard from us
inline constexpr size_t kWireHeaderBytes = 16;
inline constexpr size_t kOpHeaderBytes = 32;

struct WireHeader {
  WireType type = WireType::kData;
  uint8_t flags = 0;
  uint32_t posted = 0;  // modulo 2^32
  uint32_t length = 0;  // payload bytes after the header
};

// A streamed one-sided operation: which (op_id, the requester's), where
// (rkey and address as the target advertised them), this chunk's offset in
// the operation and the operation's total length; status (a Code) in
// WRITE_ACK and in a READ_DATA that refuses the read.
struct OpHeader {
  uint32_t op_id = 0;
  uint32_t rkey = 0;
  uint64_t addr = 0;
  uint32_t offset = 0;
  uint32_t total = 0;
  uint32_t status = 0;
};
void EncodeOp(const OpHeader& h, std::byte* out);
OpHeader DecodeOp(const std::byte* in);

void EncodeHeader(const WireHeader& h, std::byte* out);
// `received` is the byte count of the RECV: the payload must fit in it.
Result<WireHeader> DecodeHeader(const std::byte* in, uint32_t received);

}  // namespace mcdma::driver::verbs
