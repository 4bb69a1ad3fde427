#include "kv/wire.hpp"

#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace mcdma::kv::wire {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;

Status Bad(std::string what) { return Status(Code::kInvalid, std::move(what)); }

// A value for a person: strings quoted, the rest as JSON.
std::string Show(const Value& v) {
  switch (v.kind_case()) {
    case Value::kStringValue:
      return "'" + v.string_value() + "'";
    case Value::kNullValue:
    case Value::KIND_NOT_SET:
      return "None";
    default: {
      std::string out;
      if (!google::protobuf::util::MessageToJsonString(v, &out).ok()) return "?";
      return out;
    }
  }
}

bool IsHexChecksum(const std::string& s) {
  if (s.size() != 16) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace

std::string ServiceName(std::string_view handoff_id) {
  return "mcdma.kv." + std::string(handoff_id);
}

std::string ExportName(std::string_view handoff_id, uint32_t layer) {
  return ServiceName(handoff_id) + "." + std::to_string(layer);
}

Result<Struct> ParseObject(std::string_view json, std::string_view what) {
  Struct out;
  google::protobuf::util::JsonParseOptions options;
  auto st = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(json.data(), json.size()), &out, options);
  if (!st.ok()) {
    return Bad("malformed " + std::string(what) + ": not a JSON object (" +
               std::string(st.message()) + ")");
  }
  return out;
}

std::string ToJson(const Struct& object) {
  std::string out;
  // A Struct built here or parsed from JSON always prints.
  (void)google::protobuf::util::MessageToJsonString(object, &out);
  return out;
}

Value Str(std::string_view s) {
  Value v;
  v.set_string_value(std::string(s));
  return v;
}

Value Num(double d) {
  Value v;
  v.set_number_value(d);
  return v;
}

Value Null() {
  Value v;
  v.set_null_value(google::protobuf::NULL_VALUE);
  return v;
}

const Value& Field(const Struct& object, const std::string& key) {
  static const Value kNull = Null();
  auto it = object.fields().find(key);
  return it == object.fields().end() ? kNull : it->second;
}

std::optional<uint64_t> Integer(const Value& v, uint64_t max) {
  if (v.kind_case() != Value::kNumberValue) return std::nullopt;
  double d = v.number_value();
  if (!std::isfinite(d) || d < 0 || d != std::floor(d) || d > static_cast<double>(max)) {
    return std::nullopt;
  }
  return static_cast<uint64_t>(d);
}

std::optional<std::string> String(const Value& v) {
  if (v.kind_case() != Value::kStringValue) return std::nullopt;
  return v.string_value();
}

Result<Manifest> CheckManifest(const Value& manifest) {
  if (manifest.kind_case() != Value::kStructValue) {
    return Bad("malformed hand-off manifest: not a JSON object");
  }
  Manifest m;
  m.object = manifest.struct_value();
  auto format = String(Field(m.object, "format"));
  if (!format || *format != kFormat) {
    return Bad("hand-off manifest format " + Show(Field(m.object, "format")) + ", expected '" +
               std::string(kFormat) + "'");
  }
  const Value& sizes = Field(m.object, "layer_nbytes");
  bool sizes_ok = sizes.kind_case() == Value::kListValue && sizes.list_value().values_size() >= 1 &&
                  static_cast<uint32_t>(sizes.list_value().values_size()) <= kMaxLayers;
  if (sizes_ok) {
    for (const Value& n : sizes.list_value().values()) {
      auto size = Integer(n, kMaxLayerBytes);
      if (!size || *size == 0) {
        sizes_ok = false;
        break;
      }
      m.layer_nbytes.push_back(*size);
    }
  }
  if (!sizes_ok) {
    return Bad("malformed hand-off manifest: layer_nbytes must list 1 to " +
               std::to_string(kMaxLayers) + " sizes of 1 to " + std::to_string(kMaxLayerBytes) +
               " bytes");
  }
  auto n_layers = Integer(Field(m.object, "n_layers"), kMaxLayers);
  if (!n_layers || *n_layers != m.layer_nbytes.size()) {
    return Bad("malformed hand-off manifest: n_layers does not match layer_nbytes");
  }
  const Value& checksum = Field(m.object, "checksum");
  if (checksum.kind_case() == Value::kNullValue) {
    m.checksum = false;
  } else if (String(checksum) == std::optional<std::string>("xxh3-64")) {
    m.checksum = true;
  } else {
    return Bad("hand-off manifest: unknown checksum " + Show(checksum));
  }
  return m;
}

std::vector<std::string> Mismatches(const Struct& manifest, const Struct& expect) {
  std::vector<std::string> keys;
  for (const auto& [key, value] : expect.fields()) keys.push_back(key);
  std::sort(keys.begin(), keys.end());
  std::vector<std::string> out;
  for (const auto& key : keys) {
    const Value& want = expect.fields().at(key);
    const Value& have = Field(manifest, key);
    if (!google::protobuf::util::MessageDifferencer::Equals(have, want)) {
      out.push_back(key + ": producer " + Show(have) + ", expected " + Show(want));
    }
  }
  return out;
}

Result<LayerEvent> CheckLayerEvent(const Value& event, uint32_t n_layers) {
  if (event.kind_case() != Value::kStructValue) {
    return Bad("malformed hand-off event: not a JSON object");
  }
  const Struct& object = event.struct_value();
  const Value& layer = Field(object, "layer");
  auto index = Integer(layer, UINT32_MAX);
  if (!index || *index >= n_layers) {
    return Bad("hand-off event names layer " + Show(layer) + " of " + std::to_string(n_layers));
  }
  LayerEvent out;
  out.layer = static_cast<uint32_t>(*index);
  const Value& cs = Field(object, "checksum");
  if (cs.kind_case() != Value::kNullValue) {
    auto hex = String(cs);
    if (!hex || !IsHexChecksum(*hex)) {
      return Bad("hand-off event: malformed checksum " + Show(cs));
    }
    out.checksum = std::strtoull(hex->c_str(), nullptr, 16);
  }
  return out;
}

Result<std::vector<LayerEvent>> CheckPublished(const Struct& reply, uint32_t n_layers) {
  const Value& published = Field(reply, "published");
  if (published.kind_case() != Value::kListValue) {
    return Bad("malformed hand-off reply: published must be a list of layer events");
  }
  std::vector<LayerEvent> out;
  for (const Value& ev : published.list_value().values()) {
    auto checked = CheckLayerEvent(ev, n_layers);
    if (!checked.ok()) return checked.status();
    out.push_back(*checked);
  }
  return out;
}

Struct LayerEventObject(uint32_t layer, std::optional<uint64_t> checksum) {
  Struct ev;
  (*ev.mutable_fields())["event"] = Str("layer");
  (*ev.mutable_fields())["layer"] = Num(layer);
  (*ev.mutable_fields())["checksum"] = checksum ? Str(ChecksumHex(*checksum)) : Null();
  return ev;
}

std::string ChecksumHex(uint64_t value) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016" PRIx64, value);
  return buf;
}

}  // namespace mcdma::kv::wire
