// The verbs transport's wire formats (driver/verbs/verbs_wire.cpp): the
// endpoint description a peer sends through the peer protocol, and the
// message and operation headers in front of every SEND. Whatever decodes
// must encode back to something that decodes to the same fields; a decoded
// endpoint re-encodes to the very bytes it came from (one encoding).
//
// Input: a selector byte (which decoder), then the bytes. For the headers,
// the first u32 after the selector is the RECV's byte count.
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "driver/verbs/verbs_wire.hpp"
#include "fuzz_support.hpp"

using namespace mcdma;
using namespace mcdma::driver::verbs;

namespace {

bool SameEndpoint(const EndpointInfo& a, const EndpointInfo& b) {
  return a.version == b.version && a.unreliable == b.unreliable && a.profile == b.profile &&
         a.device == b.device && a.qpn == b.qpn && a.psn == b.psn && a.gid == b.gid &&
         a.mtu == b.mtu && a.slot_bytes == b.slot_bytes && a.depth == b.depth &&
         a.max_outstanding == b.max_outstanding && a.max_reads == b.max_reads &&
         a.max_read_bytes == b.max_read_bytes && a.max_transfer_bytes == b.max_transfer_bytes;
}

void Endpoint(std::string_view bytes) {
  Result<EndpointInfo> info = DecodeEndpoint(bytes);
  if (!info.ok()) {
    if (info.status().code() != Code::kInvalid) std::abort();
    return;
  }
  std::string again = EncodeEndpoint(*info);
  Result<EndpointInfo> info2 = DecodeEndpoint(again);
  if (!info2.ok() || !SameEndpoint(*info, *info2)) std::abort();
  if (again != bytes) std::abort();
}

void Header(const std::byte* in, size_t size, uint32_t received) {
  if (received > size) received = static_cast<uint32_t>(size);
  Result<WireHeader> h = DecodeHeader(in, received);
  if (!h.ok()) return;
  if (h->length > received - kWireHeaderBytes) std::abort();  // the payload fits the RECV
  std::byte again[kWireHeaderBytes];
  EncodeHeader(*h, again);
  Result<WireHeader> h2 = DecodeHeader(again, received);
  if (!h2.ok() || h2->type != h->type || h2->flags != h->flags || h2->posted != h->posted ||
      h2->length != h->length)
    std::abort();
  if (received >= kWireHeaderBytes + kOpHeaderBytes) {
    OpHeader op = DecodeOp(in + kWireHeaderBytes);
    std::byte op_bytes[kOpHeaderBytes];
    EncodeOp(op, op_bytes);
    OpHeader op2 = DecodeOp(op_bytes);
    if (op2.op_id != op.op_id || op2.rkey != op.rkey || op2.addr != op.addr ||
        op2.offset != op.offset || op2.total != op.total || op2.status != op.status)
      std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  mcdma::fuzz::Input in(data, size);
  uint8_t which = in.U8();
  if (which % 2 == 0) {
    auto rest = in.Take(in.left());
    Endpoint({reinterpret_cast<const char*>(rest.data()), rest.size()});
  } else {
    uint32_t received = in.U32();
    auto rest = in.Take(in.left());
    Header(reinterpret_cast<const std::byte*>(rest.data()), rest.size(), received);
  }
  return 0;
}
