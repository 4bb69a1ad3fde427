// Encoding and stateless validation of tcp frames (see tcp_frame.hpp).
#include "driver/tcp/tcp_frame.hpp"

#include <charconv>
#include <cstring>

namespace mcdma::driver::tcp {
namespace {

void StoreLe(std::byte* out, uint64_t value, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i) out[i] = static_cast<std::byte>((value >> (8 * i)) & 0xff);
}

uint64_t LoadLe(const std::byte* in, size_t bytes) {
  uint64_t value = 0;
  for (size_t i = 0; i < bytes; ++i) value |= static_cast<uint64_t>(in[i]) << (8 * i);
  return value;
}

Status Violation(const std::string& what) {
  return Status(Code::kInvalid, "protocol violation: " + what);
}

// Whether a type carries an (rkey, remote_addr) pair and a request tag.
bool UsesRemote(FrameType type) { return type == FrameType::kWrite || type == FrameType::kReadReq; }
bool UsesTag(FrameType type) {
  return type == FrameType::kSend || type == FrameType::kWrite || type == FrameType::kWriteAck ||
         type == FrameType::kReadReq || type == FrameType::kReadResp;
}
// Whether a nonzero status is meaningful for a type.
bool UsesStatus(FrameType type) {
  return type == FrameType::kSend || type == FrameType::kWrite || type == FrameType::kWriteAck ||
         type == FrameType::kReadResp;
}

Status CheckLength(const FrameHeader& h) {
  switch (h.type) {
    case FrameType::kHello:
      if (h.length != kHelloPayloadBytes) return Violation("HELLO payload is not 32 bytes");
      return Status::Ok();
    case FrameType::kSend:
    case FrameType::kWrite:
    case FrameType::kReadResp:
      if (h.status != Code::kOk && h.length != 0) {
        return Violation(std::string(FrameTypeName(h.type)) + " with a status carries a payload");
      }
      return Status::Ok();
    case FrameType::kReadReq:
      return Status::Ok();  // any u32: the responder checks it against the region
    case FrameType::kCredit:
      if (h.length == 0 || h.length % 4 != 0 || h.length > kMaxCreditFrameBytes) {
        return Violation("CREDIT length " + std::to_string(h.length) +
                         " is not a multiple of 4 in [4, 4096]");
      }
      return Status::Ok();
    case FrameType::kWriteAck:
    case FrameType::kHeartbeat:
    case FrameType::kClose:
      if (h.length != 0) return Violation(std::string(FrameTypeName(h.type)) + " has a payload");
      return Status::Ok();
  }
  return Violation("unknown frame type");
}

}  // namespace

const char* FrameTypeName(FrameType type) {
  switch (type) {
    case FrameType::kHello:
      return "HELLO";
    case FrameType::kSend:
      return "SEND";
    case FrameType::kWrite:
      return "WRITE";
    case FrameType::kWriteAck:
      return "WRITE_ACK";
    case FrameType::kReadReq:
      return "READ_REQ";
    case FrameType::kReadResp:
      return "READ_RESP";
    case FrameType::kCredit:
      return "CREDIT";
    case FrameType::kHeartbeat:
      return "HEARTBEAT";
    case FrameType::kClose:
      return "CLOSE";
  }
  return "UNKNOWN";
}

void StoreLe32(std::byte* out, uint32_t value) { StoreLe(out, value, 4); }
uint32_t LoadLe32(const std::byte* in) { return static_cast<uint32_t>(LoadLe(in, 4)); }

HeaderBytes EncodeHeader(const FrameHeader& header) {
  HeaderBytes out{};
  StoreLe(&out[0], kFrameMagic, 4);
  StoreLe(&out[4], kFrameVersion, 1);
  StoreLe(&out[5], static_cast<uint8_t>(header.type), 1);
  // out[6..7] flags and out[10..11] reserved stay 0.
  StoreLe(&out[8], static_cast<uint16_t>(header.status), 2);
  StoreLe(&out[12], header.rkey, 4);
  StoreLe(&out[16], header.wr_id, 8);
  StoreLe(&out[24], header.remote_addr, 8);
  StoreLe(&out[32], header.length, 4);
  // out[36..39] reserved stay 0.
  return out;
}

Result<FrameHeader> DecodeHeader(const std::byte* bytes) {
  if (LoadLe(bytes, 4) != kFrameMagic) return Violation("bad magic");
  if (LoadLe(bytes + 4, 1) != kFrameVersion) return Violation("unsupported version");
  if (LoadLe(bytes + 6, 2) != 0) return Violation("unknown flags");
  if (LoadLe(bytes + 10, 2) != 0 || LoadLe(bytes + 36, 4) != 0) {
    return Violation("nonzero reserved field");
  }
  const auto raw_type = static_cast<uint8_t>(LoadLe(bytes + 5, 1));
  if (raw_type < static_cast<uint8_t>(FrameType::kHello) ||
      raw_type > static_cast<uint8_t>(FrameType::kClose)) {
    return Violation("unknown frame type " + std::to_string(raw_type));
  }
  const auto raw_status = static_cast<uint16_t>(LoadLe(bytes + 8, 2));
  if (!IsKnownCode(raw_status)) {
    return Violation("unknown status " + std::to_string(raw_status));
  }
  FrameHeader h{
      .type = static_cast<FrameType>(raw_type),
      .status = static_cast<Code>(raw_status),
      .rkey = static_cast<uint32_t>(LoadLe(bytes + 12, 4)),
      .wr_id = LoadLe(bytes + 16, 8),
      .remote_addr = LoadLe(bytes + 24, 8),
      .length = static_cast<uint32_t>(LoadLe(bytes + 32, 4)),
  };
  if (!UsesRemote(h.type) && (h.rkey != 0 || h.remote_addr != 0)) {
    return Violation(std::string(FrameTypeName(h.type)) + " names remote memory");
  }
  if (!UsesTag(h.type) && h.wr_id != 0) {
    return Violation(std::string(FrameTypeName(h.type)) + " carries a request tag");
  }
  if (!UsesStatus(h.type) && h.status != Code::kOk) {
    return Violation(std::string(FrameTypeName(h.type)) + " carries a status");
  }
  MCDMA_RETURN_IF_ERROR(CheckLength(h));
  return h;
}

std::array<std::byte, kHelloFrameBytes> EncodeHello(const Token& target, const Token& sender) {
  std::array<std::byte, kHelloFrameBytes> out{};
  HeaderBytes header =
      EncodeHeader({.type = FrameType::kHello, .status = Code::kOk, .length = kHelloPayloadBytes});
  std::memcpy(out.data(), header.data(), kHeaderBytes);
  std::memcpy(out.data() + kHeaderBytes, target.data(), kTokenBytes);
  std::memcpy(out.data() + kHeaderBytes + kTokenBytes, sender.data(), kTokenBytes);
  return out;
}

Result<Hello> DecodeHello(const std::byte* bytes) {
  MCDMA_ASSIGN_OR_RETURN(FrameHeader header, DecodeHeader(bytes));
  if (header.type != FrameType::kHello) {
    return Violation(std::string("expected HELLO, got ") + FrameTypeName(header.type));
  }
  Hello hello{};
  std::memcpy(hello.target.data(), bytes + kHeaderBytes, kTokenBytes);
  std::memcpy(hello.sender.data(), bytes + kHeaderBytes + kTokenBytes, kTokenBytes);
  return hello;
}

std::string TokenHex(const Token& token) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * kTokenBytes);
  for (uint8_t b : token) {
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 15]);
  }
  return out;
}

std::optional<Token> TokenFromHex(std::string_view hex) {
  if (hex.size() != 2 * kTokenBytes) return std::nullopt;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  Token token{};
  for (size_t i = 0; i < kTokenBytes; ++i) {
    int hi = nibble(hex[2 * i]);
    int lo = nibble(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    token[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return token;
}

std::string EncodeEndpointInfo(const EndpointInfo& info) {
  return "tcp1 " + info.address + " " + std::to_string(info.port) + " " + TokenHex(info.token);
}

Result<EndpointInfo> ParseEndpointInfo(std::string_view text) {
  auto bad = [](const char* what) {
    return Status(Code::kInvalid, std::string("remote info is not a tcp endpoint: ") + what);
  };
  constexpr std::string_view kPrefix = "tcp1 ";
  if (!text.starts_with(kPrefix)) return bad("missing 'tcp1 ' prefix");
  text.remove_prefix(kPrefix.size());
  size_t sp1 = text.find(' ');
  if (sp1 == std::string_view::npos || sp1 == 0) return bad("no address");
  std::string_view address = text.substr(0, sp1);
  std::string_view rest = text.substr(sp1 + 1);
  size_t sp2 = rest.find(' ');
  if (sp2 == std::string_view::npos) return bad("no port");
  std::string_view port_text = rest.substr(0, sp2);
  std::string_view token_text = rest.substr(sp2 + 1);
  unsigned port = 0;
  auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || end != port_text.data() + port_text.size() || port == 0 ||
      port > 65535) {
    return bad("bad port");
  }
  std::optional<Token> token = TokenFromHex(token_text);
  if (!token) return bad("bad token");
  return EndpointInfo{
      .address = std::string(address), .port = static_cast<uint16_t>(port), .token = *token};
}

}  // namespace mcdma::driver::tcp
