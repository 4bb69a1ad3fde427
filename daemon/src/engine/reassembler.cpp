#include "engine/reassembler.hpp"

namespace mcdma::daemon {
namespace {
Status ProtocolError(const std::string& why) {
  return Status(Code::kLinkDown, "protocol error from peer: " + why);
}
std::span<const std::byte> Bytes(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}
}  // namespace

Result<std::optional<Reassembler::Message>> Reassembler::Feed(std::span<const std::byte> fragment,
                                                              uint64_t limit) {
  std::string why;
  std::optional<link_wire::Header> h = link_wire::Decode(fragment.data(), fragment.size(), &why);
  if (!h) return ProtocolError(why);
  std::span<const std::byte> frag = fragment.subspan(link_wire::kHeaderBytes);
  if (!partial_) {
    // Nothing legitimate is larger than `limit`: refuse before buffering it.
    if (h->total_len > limit) {
      return ProtocolError("a message of " + std::to_string(h->total_len) +
                           " bytes is larger than any receiver could take");
    }
    if (h->frag_off != 0) return ProtocolError("a message starts mid-way");
    if (frag.size() == h->total_len) return std::optional<Message>(Message{*h, frag});
    partial_ = true;
    header_ = *h;
    payload_.assign(reinterpret_cast<const char*>(frag.data()), frag.size());
    return std::optional<Message>();
  }
  if (h->type != header_.type || h->id != header_.id || h->total_len != header_.total_len ||
      h->frag_off != payload_.size()) {
    return ProtocolError("fragments out of order");
  }
  payload_.append(reinterpret_cast<const char*>(frag.data()), frag.size());
  if (payload_.size() < header_.total_len) return std::optional<Message>();
  partial_ = false;
  done_ = std::move(payload_);
  payload_.clear();
  return std::optional<Message>(Message{header_, Bytes(done_)});
}

}  // namespace mcdma::daemon
