// What both ends of a KV hand-off agree on (docs/protocol.md §18): names,
// the JSON messages, and the checks of everything received, which comes
// from another app, maybe on another host. JSON is protobuf's
// (google.protobuf.Struct through util/json_util.h): numbers are doubles,
// exact for the integers the protocol carries (at most 2^40).
#pragma once

#include <google/protobuf/struct.pb.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mcdma/kv.hpp"
#include "mcdma/status.hpp"

namespace mcdma::kv::wire {

std::string ServiceName(std::string_view handoff_id);
std::string ExportName(std::string_view handoff_id, uint32_t layer);

// A JSON object, or INVALID "malformed <what>: ...".
Result<google::protobuf::Struct> ParseObject(std::string_view json, std::string_view what);
std::string ToJson(const google::protobuf::Struct& object);

google::protobuf::Value Str(std::string_view s);
google::protobuf::Value Num(double v);
google::protobuf::Value Null();
// The field's value, or null when absent.
const google::protobuf::Value& Field(const google::protobuf::Struct& object,
                                     const std::string& key);
// The value as a non-negative integer no greater than `max`, or nullopt.
std::optional<uint64_t> Integer(const google::protobuf::Value& v, uint64_t max);
// The value as a string, or nullopt.
std::optional<std::string> String(const google::protobuf::Value& v);

// The producer's manifest, its layer geometry checked: format, n_layers
// (1..kMaxLayers) equal to layer_nbytes' length, each size 1..kMaxLayerBytes,
// checksum "xxh3-64" or null. INVALID otherwise.
struct Manifest {
  google::protobuf::Struct object;
  std::vector<uint64_t> layer_nbytes;
  bool checksum = false;
};
Result<Manifest> CheckManifest(const google::protobuf::Value& manifest);

// "key: producer V, expected W" for every key of `expect` whose value
// differs in `manifest` (numbers compare by value).
std::vector<std::string> Mismatches(const google::protobuf::Struct& manifest,
                                    const google::protobuf::Struct& expect);

// A layer event: its layer index (< n_layers) and its checksum (16
// lower-case hex digits) or none. INVALID otherwise.
struct LayerEvent {
  uint32_t layer = 0;
  std::optional<uint64_t> checksum;
};
Result<LayerEvent> CheckLayerEvent(const google::protobuf::Value& event, uint32_t n_layers);
// The layer events of an open reply, each checked.
Result<std::vector<LayerEvent>> CheckPublished(const google::protobuf::Struct& reply,
                                               uint32_t n_layers);
google::protobuf::Struct LayerEventObject(uint32_t layer, std::optional<uint64_t> checksum);

std::string ChecksumHex(uint64_t value);

}  // namespace mcdma::kv::wire
