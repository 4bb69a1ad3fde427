// The KV hand-off's messages (client/src/kv/wire.cpp): what one app
// receives from another, maybe on another host.
//
// Input: a selector byte, then the message bytes.
//   even: a consumer's request, parsed as the producer parses it;
//   odd:  the producer's open reply (manifest and published layers) as a
//         consumer checks it, then, one per line (at most 16), the events
//         it is notified of.
// Every malformed message must end in INVALID; whatever passes a check
// must hold what the check promises.
#include <cstdlib>
#include <string>
#include <string_view>

#include "kv/wire.hpp"

using namespace mcdma;
namespace wire = mcdma::kv::wire;

namespace {

void MustBeInvalid(const Status& st) {
  if (st.code() != Code::kInvalid) std::abort();
}

void Request(std::string_view body) {
  auto request = wire::ParseObject(body, "hand-off request");
  if (!request.ok()) return MustBeInvalid(request.status());
  auto op = wire::String(wire::Field(*request, "op"));
  auto host = wire::String(wire::Field(*request, "host"));
  (void)op;
  (void)host;
  // What parsed prints, and prints what parses to the same object.
  auto again = wire::ParseObject(wire::ToJson(*request), "again");
  if (!again.ok() || again->fields_size() != request->fields_size()) std::abort();
}

void ReplyAndEvents(std::string_view body) {
  size_t nl = body.find('\n');
  std::string_view first = body.substr(0, nl);
  auto reply = wire::ParseObject(first, "hand-off reply");
  if (!reply.ok()) return MustBeInvalid(reply.status());
  auto manifest = wire::CheckManifest(wire::Field(*reply, "manifest"));
  if (!manifest.ok()) return MustBeInvalid(manifest.status());
  const auto& sizes = manifest->layer_nbytes;
  if (sizes.empty() || sizes.size() > kv::kMaxLayers) std::abort();
  for (uint64_t n : sizes) {
    if (n == 0 || n > kv::kMaxLayerBytes) std::abort();
  }
  static const google::protobuf::Struct expect = [] {
    auto parsed =
        wire::ParseObject(R"({"dtype":"bfloat16","shape":[2,8,64],"n_layers":2})", "expect");
    if (!parsed.ok()) std::abort();
    return *parsed;
  }();
  (void)wire::Mismatches(manifest->object, expect);
  auto n = static_cast<uint32_t>(sizes.size());
  auto published = wire::CheckPublished(*reply, n);
  if (!published.ok()) {
    MustBeInvalid(published.status());
  } else {
    for (const auto& ev : *published) {
      if (ev.layer >= n) std::abort();
    }
  }
  int lines = 0;
  while (nl != std::string_view::npos && lines++ < 16) {
    body = body.substr(nl + 1);
    nl = body.find('\n');
    auto event = wire::ParseObject(body.substr(0, nl), "hand-off event");
    if (!event.ok()) {
      MustBeInvalid(event.status());
      continue;
    }
    google::protobuf::Value v;
    *v.mutable_struct_value() = *event;
    auto layer = wire::CheckLayerEvent(v, n);
    if (!layer.ok()) {
      MustBeInvalid(layer.status());
      continue;
    }
    if (layer->layer >= n) std::abort();
    if (layer->checksum && wire::ChecksumHex(*layer->checksum).size() != 16) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) {
    Request(body);
  } else {
    ReplyAndEvents(body);
  }
  return 0;
}
