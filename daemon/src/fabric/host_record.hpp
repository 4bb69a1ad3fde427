// A host's membership record (peer.proto's FabricHostRecord): its key in
// the store, its JSON value, and the checks a record from the store or a
// fabric file passes before this daemon acts on it.
#pragma once

#include <string>
#include <string_view>

#include "mcdma/status.hpp"
#include "mcdma/v1/peer.pb.h"

namespace mcdma::daemon::fabric {

inline constexpr size_t kMaxRecordBytes = 64 << 10;
inline constexpr int kMaxAddresses = 16;
inline constexpr int kMaxDevices = 16;
inline constexpr int kMaxAdjacency = 64;
// Hosts one fabric may hold (records beyond are refused by name).
inline constexpr size_t kMaxHosts = 256;

// "/mcdma/fabrics/NAME/hosts/": every record of fabric NAME lies under it.
std::string HostsPrefix(std::string_view fabric_name);
// The host id in a key under `prefix` ("" when the rest is not one id).
std::string HostOfKey(std::string_view prefix, std::string_view key);

std::string EncodeRecord(const v1::FabricHostRecord& record);
// Parses and checks a record (JSON); `key_host` is the id its key names
// (the record must name the same). INVALID_ARGUMENT with what is wrong.
Result<v1::FabricHostRecord> DecodeRecord(std::string_view value, std::string_view key_host);
Status CheckRecord(const v1::FabricHostRecord& record);

}  // namespace mcdma::daemon::fabric
