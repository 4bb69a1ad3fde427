// Where `mcdmactl doctor` gets the host's RDMA devices from: libibverbs
// (ibv_get_device_list, then ibv_query_device/port/gid for each device), or
// a recorded dump in ParseDeviceDump's format (tests, and hosts where one
// wants to check a setup described elsewhere).
//
// Failure: never fails; a failed enumeration or an unreadable dump is the
// returned DevicesInput's status, a device that cannot be queried is listed
// in its describe_errors.
// Threads: any; each call opens and closes its own device contexts.
#pragma once

#include <cstdint>
#include <string>

#include "doctor/checks.hpp"

namespace mcdma::tools::doctor {

// Every device libibverbs lists, each described at `port`. In a build
// without libibverbs the status says so and the list is empty.
DevicesInput ListHostDevices(uint8_t port);

// The devices recorded in the dump file at `path`.
DevicesInput ReadDeviceDump(const std::string& path);

}  // namespace mcdma::tools::doctor
