#include "driver/verbs/verbs_wire.hpp"

#include <cstring>

namespace mcdma::driver::verbs {
namespace {

constexpr char kMagic[4] = {'M', 'C', 'V', 'E'};
constexpr size_t kNameMax = 64;

// Little-endian writer and reader over a string.
class Writer {
 public:
  template <typename T>
  void Put(T v) {
    for (size_t i = 0; i < sizeof(T); ++i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
  void PutBytes(std::string_view s) { out_.append(s); }
  void PutName(std::string_view s) {
    Put<uint8_t>(static_cast<uint8_t>(s.size()));
    PutBytes(s);
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  template <typename T>
  bool Get(T& v) {
    if (in_.size() - pos_ < sizeof(T)) return false;
    v = 0;
    for (size_t i = 0; i < sizeof(T); ++i)
      v |= static_cast<T>(static_cast<T>(static_cast<uint8_t>(in_[pos_ + i])) << (8 * i));
    pos_ += sizeof(T);
    return true;
  }
  bool GetBytes(size_t n, std::string& out) {
    if (in_.size() - pos_ < n) return false;
    out.assign(in_.substr(pos_, n));
    pos_ += n;
    return true;
  }
  bool GetName(std::string& out) {
    uint8_t n = 0;
    return Get(n) && n <= kNameMax && GetBytes(n, out);
  }
  bool done() const { return pos_ == in_.size(); }

 private:
  std::string_view in_;
  size_t pos_ = 0;
};

Status Bad(const std::string& what) {
  return Status(Code::kInvalid, "verbs endpoint description: " + what);
}

}  // namespace

std::string EncodeEndpoint(const EndpointInfo& info) {
  Writer w;
  w.PutBytes(std::string_view(kMagic, sizeof(kMagic)));
  w.Put<uint16_t>(info.version);
  w.Put<uint8_t>(info.unreliable ? 1 : 0);
  w.Put<uint8_t>(0);
  w.PutName(info.profile);
  w.PutName(info.device);
  w.Put<uint32_t>(info.qpn);
  w.Put<uint32_t>(info.psn);
  w.PutBytes(info.gid);
  w.Put<uint32_t>(info.mtu);
  w.Put<uint32_t>(info.slot_bytes);
  w.Put<uint32_t>(info.depth);
  w.Put<uint32_t>(info.max_outstanding);
  w.Put<uint32_t>(info.max_reads);
  w.Put<uint64_t>(info.max_read_bytes);
  w.Put<uint64_t>(info.max_transfer_bytes);
  return w.Take();
}

Result<EndpointInfo> DecodeEndpoint(std::string_view bytes) {
  Reader r(bytes);
  std::string magic;
  EndpointInfo info;
  uint8_t unreliable = 0;
  uint8_t reserved = 0;
  if (!r.GetBytes(sizeof(kMagic), magic) || magic != std::string_view(kMagic, sizeof(kMagic)))
    return Bad("not a verbs endpoint (bad magic)");
  if (!r.Get(info.version) || !r.Get(unreliable) || !r.Get(reserved))
    return Bad("truncated header");
  if (info.version != kWireVersion) {
    return Bad("version " + std::to_string(info.version) + ", this daemon speaks " +
               std::to_string(kWireVersion));
  }
  if (unreliable > 1 || reserved != 0) return Bad("unknown flags");
  info.unreliable = unreliable == 1;
  if (!r.GetName(info.profile) || !r.GetName(info.device) || !r.Get(info.qpn) || !r.Get(info.psn) ||
      !r.GetBytes(16, info.gid) || !r.Get(info.mtu) || !r.Get(info.slot_bytes) ||
      !r.Get(info.depth) || !r.Get(info.max_outstanding) || !r.Get(info.max_reads) ||
      !r.Get(info.max_read_bytes) || !r.Get(info.max_transfer_bytes)) {
    return Bad("truncated");
  }
  if (!r.done()) return Bad("trailing bytes");
  if (info.qpn == 0 || info.qpn > 0xffffff) return Bad("QP number out of range");
  if (info.psn > 0xffffff) return Bad("PSN wider than 24 bits");
  if (info.slot_bytes <= kWireHeaderBytes || info.depth == 0 || info.max_outstanding < 2)
    return Bad("receive slots or queue limits too small");
  return info;
}

void EncodeHeader(const WireHeader& h, std::byte* out) {
  std::memset(out, 0, kWireHeaderBytes);
  out[0] = static_cast<std::byte>(h.type);
  out[1] = static_cast<std::byte>(kWireVersion);
  out[2] = static_cast<std::byte>(h.flags);
  for (int i = 0; i < 4; ++i) {
    out[4 + i] = static_cast<std::byte>((h.posted >> (8 * i)) & 0xff);
    out[8 + i] = static_cast<std::byte>((h.length >> (8 * i)) & 0xff);
  }
}

Result<WireHeader> DecodeHeader(const std::byte* in, uint32_t received) {
  if (received < kWireHeaderBytes) {
    return Status(Code::kInvalid, "verbs message of " + std::to_string(received) +
                                      " bytes is shorter than its header");
  }
  WireHeader h;
  uint8_t type = static_cast<uint8_t>(in[0]);
  if (type < 1 || type > 7)
    return Status(Code::kInvalid, "verbs message of unknown type " + std::to_string(type));
  if (static_cast<uint8_t>(in[1]) != kWireVersion)
    return Status(Code::kInvalid, "verbs message of another wire version");
  h.type = static_cast<WireType>(type);
  h.flags = static_cast<uint8_t>(in[2]);
  for (int i = 0; i < 4; ++i) {
    h.posted |= static_cast<uint32_t>(static_cast<uint8_t>(in[4 + i])) << (8 * i);
    h.length |= static_cast<uint32_t>(static_cast<uint8_t>(in[8 + i])) << (8 * i);
  }
  if (h.length > received - kWireHeaderBytes) {
    return Status(Code::kInvalid, "verbs message says " + std::to_string(h.length) +
                                      " payload bytes but " +
                                      std::to_string(received - kWireHeaderBytes) + " arrived");
  }
  if ((h.type == WireType::kHello || h.type == WireType::kCredit) && h.length != 0)
    return Status(Code::kInvalid, "verbs control message with a payload");
  if (h.type != WireType::kHello && h.type != WireType::kCredit && h.type != WireType::kData &&
      h.length < kOpHeaderBytes) {
    return Status(Code::kInvalid, "streamed verbs operation without its operation header");
  }
  return h;
}

void EncodeOp(const OpHeader& h, std::byte* out) {
  std::memset(out, 0, kOpHeaderBytes);
  auto put = [&](size_t at, uint64_t v, size_t n) {
    for (size_t i = 0; i < n; ++i) out[at + i] = static_cast<std::byte>((v >> (8 * i)) & 0xff);
  };
  put(0, h.op_id, 4);
  put(4, h.rkey, 4);
  put(8, h.addr, 8);
  put(16, h.offset, 4);
  put(20, h.total, 4);
  put(24, h.status, 4);
}

OpHeader DecodeOp(const std::byte* in) {
  auto get = [&](size_t at, size_t n) {
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i)
      v |= static_cast<uint64_t>(static_cast<uint8_t>(in[at + i])) << (8 * i);
    return v;
  };
  OpHeader h;
  h.op_id = static_cast<uint32_t>(get(0, 4));
  h.rkey = static_cast<uint32_t>(get(4, 4));
  h.addr = get(8, 8);
  h.offset = static_cast<uint32_t>(get(16, 4));
  h.total = static_cast<uint32_t>(get(20, 4));
  h.status = static_cast<uint32_t>(get(24, 4));
  return h;
}

}  // namespace mcdma::driver::verbs
