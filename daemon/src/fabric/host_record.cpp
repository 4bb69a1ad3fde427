#include "fabric/host_record.hpp"

#include <google/protobuf/util/json_util.h>

#include "fabric/local_networks.hpp"
#include "mcdma_auth/peer_auth.hpp"

namespace mcdma::daemon::fabric {
namespace {

Status BadRecord(const std::string& host, const std::string& what) {
  return Status(Code::kInvalid, "record of '" + host + "': " + what);
}

bool ValidAddress(const std::string& a) {
  uint32_t ip = 0;
  auto colon = a.rfind(':');
  if (colon == std::string::npos || !ParseIPv4(a.substr(0, colon), &ip)) return false;
  const std::string port = a.substr(colon + 1);
  if (port.empty() || port.size() > 5) return false;
  for (char c : port) {
    if (c < '0' || c > '9') return false;
  }
  int p = std::stoi(port);
  return p > 0 && p < 65536;
}

}  // namespace

std::string HostsPrefix(std::string_view fabric_name) {
  return "/mcdma/fabrics/" + std::string(fabric_name) + "/hosts/";
}

std::string HostOfKey(std::string_view prefix, std::string_view key) {
  if (key.size() <= prefix.size() || key.substr(0, prefix.size()) != prefix) return "";
  std::string_view rest = key.substr(prefix.size());
  if (rest.find('/') != std::string_view::npos) return "";
  return std::string(rest);
}

std::string EncodeRecord(const v1::FabricHostRecord& record) {
  std::string out;
  google::protobuf::util::JsonPrintOptions opts;
  opts.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(record, &out, opts);
  return out;
}

Status CheckRecord(const v1::FabricHostRecord& r) {
  if (Status st = peer_auth::ValidateHostId(r.host()); !st.ok())
    return Status(Code::kInvalid, "record: host: " + st.message());
  if (r.addresses_size() > kMaxAddresses)
    return BadRecord(r.host(), std::to_string(r.addresses_size()) + " addresses (at most " +
                                   std::to_string(kMaxAddresses) + ")");
  for (const auto& a : r.addresses()) {
    if (!ValidAddress(a)) return BadRecord(r.host(), "address '" + a + "' is not IPV4:PORT");
  }
  if (r.devices_size() > kMaxDevices) return BadRecord(r.host(), "too many devices");
  if (r.links_size() > kMaxAdjacency) return BadRecord(r.host(), "too many links");
  for (const auto& l : r.links()) {
    if (Status st = peer_auth::ValidateHostId(l.peer()); !st.ok())
      return BadRecord(r.host(), "link peer: " + st.message());
  }
  if (r.instance().size() > 128 || r.version().size() > 128)
    return BadRecord(r.host(), "instance or version over 128 bytes");
  return Status::Ok();
}

Result<v1::FabricHostRecord> DecodeRecord(std::string_view value, std::string_view key_host) {
  const std::string host(key_host);
  if (value.size() > kMaxRecordBytes)
    return BadRecord(host, std::to_string(value.size()) + " bytes (at most " +
                               std::to_string(kMaxRecordBytes) + ")");
  v1::FabricHostRecord r;
  google::protobuf::util::JsonParseOptions opts;
  opts.ignore_unknown_fields = true;  // fields a newer daemon adds
  auto st = google::protobuf::util::JsonStringToMessage(std::string(value), &r, opts);
  if (!st.ok()) return BadRecord(host, "not a record: " + std::string(st.message()));
  if (r.host() != host) return BadRecord(host, "names host '" + r.host() + "', its key another");
  MCDMA_RETURN_IF_ERROR(CheckRecord(r));
  return r;
}

}  // namespace mcdma::daemon::fabric
