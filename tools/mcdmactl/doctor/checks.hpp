// The checks of `mcdmactl doctor`, as pure functions of what was gathered
// (DoctorInputs): no file, device, socket or rlimit is touched here, so
// tests feed recorded inputs and assert on verdicts and wording.
// doctor_cmd.cpp gathers the inputs on the real host and renders the results.
//
// Every check yields one CheckResult (`peers` and `path_mtu` one per link,
// `rdma_ports` one per port, `fabric_store` one plus one per member it
// warns of) in this order: config, rdma_device, port_active, gid, profile,
// memlock, fabric_key, daemon, budgets, fabric_store, peers, rdma_ports,
// path_mtu, clock. On macOS (host_os kMacOS) the order is config,
// thunderbolt_rdma, cx5_kext, rdma_device, port_active, gid, profile,
// thunderbolt_bridge, memlock (launchd's limit, not this shell's),
// peer_address, fabric_key, daemon, budgets, fabric_store, peers,
// rdma_ports, path_mtu, clock; the macOS-only checks are in
// doctor_darwin.hpp, and the device checks' fixes name macOS commands there
// instead of sysfs, ip(8) or rdma(8).
// A result says what was found (summary), why it matters (detail) and, for
// warn and fail, the command or setting that fixes it (fix), naming the
// concrete interface, file or peer.
//
// Threads: plain functions on values; call from any thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "config/options.hpp"
#include "doctor/darwin.hpp"
#include "doctor/host.hpp"
#include "doctor/result.hpp"
#include "driver/verbs/verbs_model.hpp"
#include "mcdma/status.hpp"
#include "mcdma/v1/admin.pb.h"

namespace mcdma::tools::doctor {

// Verdict and CheckResult: doctor_result.hpp.

// The daemon's configuration as doctor read it.
struct ConfigInput {
  // The file read; empty when none was given and the default path does not
  // exist (built-in defaults).
  std::string path;
  // LoadTomlFile + Validate. On failure `options` holds validated built-in
  // defaults, so the other checks still run.
  Status status;
  daemon::Options options;
};

// The host's RDMA devices, from libibverbs or from a recorded dump.
struct DevicesInput {
  // "libibverbs" or "device dump FILE": named in the results.
  std::string source = "libibverbs";
  // Enumeration failed (no verbs in this build, ibv_get_device_list failed,
  // unreadable or malformed dump); `devices` is then empty.
  Status status;
  std::vector<driver::verbs::DeviceInfo> devices;
  // Devices listed but not described (ibv_open_device, ibv_query_port
  // failed): name -> why. Such a device is in `devices` without ports.
  std::map<std::string, Status> describe_errors;
};

struct MemlockInput {
  // getrlimit(RLIMIT_MEMLOCK) failed: the check is a warn naming why.
  Status status;
  bool infinite = false;  // soft limit is RLIM_INFINITY
  uint64_t soft_bytes = 0;
  uint64_t hard_bytes = 0;
  bool hard_infinite = false;
};

struct FabricKeyInput {
  // LoadFabricKey(options.fabric_key); unused when no key is configured.
  Status status;
  std::string fingerprint;  // when loaded
};

struct DaemonInput {
  std::string socket;  // where doctor looked
  Status status;       // of the Status request
  v1::StatusReply reply;
  // The Links request, made only when Status answered.
  Status links_status = Status(Code::kUnavailable, "not asked");
  v1::LinksReply links;
  // The Fabric request, made only when Status answered (a daemon older
  // than the fabric answers it INVALID: unimplemented).
  Status fabric_status = Status(Code::kUnavailable, "not asked");
  v1::FabricReply fabric;
};

struct DoctorInputs {
  // Which checks run and how their fixes are worded; doctor_cmd.cpp sets
  // platform::kOs, tests either.
  platform::Os host_os = platform::Os::kLinux;
  ConfigInput config;
  DevicesInput devices;
  MemlockInput memlock;  // judged on Linux only
  FabricKeyInput fabric_key;
  DaemonInput daemon;
  DarwinInputs darwin;  // gathered and judged on macOS only
};

// The device the daemon would use: verbs.device if set (nullptr when it is
// not among `devices`), else the first whose configured port is ACTIVE, else
// the first; nullptr without devices.
const driver::verbs::DeviceInfo* ChooseDevice(const DevicesInput& devices,
                                              const daemon::Options& options);

// Locked memory the daemon's links need: max(peers, 1) x 2 x link.recv_slots
// x link.slot_bytes + 64 MiB headroom.
uint64_t MemlockNeeded(const daemon::Options& options);

// The configuration and devices as the macOS checks need them: device
// names, ChooseDevice's pick, the memlock need and each peer's host (the
// address without its port).
DarwinContext DarwinContextOf(const DoctorInputs& in);

CheckResult CheckConfig(const ConfigInput& config);
CheckResult CheckRdmaDevice(const DoctorInputs& in);
CheckResult CheckPortActive(const DoctorInputs& in);
CheckResult CheckGid(const DoctorInputs& in);
CheckResult CheckProfile(const DoctorInputs& in);
CheckResult CheckMemlock(const DoctorInputs& in);
CheckResult CheckFabricKey(const DoctorInputs& in);
CheckResult CheckDaemon(const DoctorInputs& in);
// The daemon's limits against their use (doctor_budget_checks.cpp); skip
// when the daemon did not answer.
CheckResult CheckBudgets(const DoctorInputs& in);
// The fabric's membership source (daemon_checks.cpp): skip without a
// fabric or a daemon; a file is ok; an etcd store ok while connected, warn
// while connecting, fail when down (quoting the store's error). Then one
// warn per member reached directly whose link is not up.
std::vector<CheckResult> CheckFabricStore(const DoctorInputs& in);
// One result per link (a single skip when there is none to judge).
std::vector<CheckResult> CheckPeers(const DoctorInputs& in);
std::vector<CheckResult> CheckPathMtu(const DoctorInputs& in);
// One result per RDMA device port the daemon opened (its rails): port
// state, GID, profile, queue pairs and registrations against their budgets.
std::vector<CheckResult> CheckRdmaPorts(const DoctorInputs& in);
CheckResult CheckClock();

// Every check for in.host_os, in the order above.
std::vector<CheckResult> RunChecks(const DoctorInputs& in);
// Whether the checks are for a Mac (their fixes are worded for macOS).
inline bool HostIsMac(const DoctorInputs& in) { return in.host_os == platform::Os::kMacOS; }
// True when no result is a fail (warn and skip are healthy).
bool Healthy(const std::vector<CheckResult>& results);

}  // namespace mcdma::tools::doctor
