// `mcdmactl doctor [--json] [--config FILE] [--socket PATH]`: checks this
// host's setup (configuration, RDMA device, port, GID, profile, locked
// memory, fabric key, daemon, fabric store, links; on macOS also RDMA over Thunderbolt,
// the ConnectX-5 kext, the Thunderbolt Bridge and the peer addresses) and
// names what is wrong and how to fix it. The checks themselves:
// doctor_checks.hpp; output: doctor_render.hpp; operator's guide:
// docs/operations.md, "Checking a setup".
//
// Exit codes: 0 healthy (every check ok, warn or skip), 1 any check failed
// (or the output could not be written), 2 usage.
//
// Hidden for tests: --device-dump FILE (or $MCDMA_DOCTOR_DEVICE_DUMP) reads
// the devices from a ParseDeviceDump file instead of libibverbs.
// Threads: mcdmactl's main thread.
#pragma once

#include <CLI/CLI.hpp>
#include <chrono>
#include <ostream>
#include <string>

#include "doctor/checks.hpp"
#include "fabric_key_cmd.hpp"
#include "platform/names.hpp"
#include "platform/paths.hpp"

namespace mcdma::tools {

// Read when --config is not given, if it exists.
// platform::DefaultConfigPath(): /etc/mcdma/rpcd.toml on Linux,
// PREFIX/etc/mcdma/rpcd.toml on macOS.
inline const char* DoctorDefaultConfig() { return platform::DefaultConfigPath(); }

struct DoctorFlags {
  bool json = false;
  // Daemon config; empty: DoctorDefaultConfig() if it exists, else defaults.
  std::string config;
  // Control socket; empty: the config's `socket`, else
  // DefaultClientSocketPath() (as every mcdmactl command).
  std::string socket;
  // Device dump; empty: $MCDMA_DOCTOR_DEVICE_DUMP, else libibverbs.
  std::string device_dump;
  // Deadline per Admin request (mcdmactl --timeout).
  std::chrono::milliseconds timeout{5000};
};

// Reads the config, devices, RLIMIT_MEMLOCK and fabric key (on macOS also
// runs the commands of doctor_darwin_gather.hpp), and asks the daemon for
// its status, links and fabric.
doctor::DoctorInputs GatherDoctorInputs(const DoctorFlags& flags);

// Gathers, checks and prints; returns the exit code.
int DoctorCommand(const DoctorFlags& flags, std::ostream& out, std::ostream& err);

// Adds `doctor` to `app`. `socket` and `timeout_ms` are mcdmactl's global
// --socket (used only when given explicitly) and --timeout; all three must
// outlive parsing and `chosen`.
void AddDoctorCommand(CLI::App& app, const std::string& socket, const int& timeout_ms,
                      LocalCommand& chosen);

}  // namespace mcdma::tools
