// The host-side checks of `mcdmactl doctor` that need no device:
// configuration, locked memory, clock; and the order of all checks. The
// device checks are in doctor_device_checks.cpp, the fabric key and daemon
// checks in doctor_daemon_checks.cpp.
#include "doctor/checks.hpp"

#include <algorithm>

#include "render.hpp"

namespace mcdma::tools::doctor {
namespace {

constexpr uint64_t kMemlockHeadroom = 64ull << 20;

// "needs 96.0 MiB = max(peers, 1) (1) x 2 x ...": how MemlockNeeded got its
// number, for the memlock checks of both platforms.
std::string MemlockFormula(const daemon::Options& o) {
  const uint64_t peers = std::max<uint64_t>(o.peers.size(), 1);
  return "needs " + FormatBytes(MemlockNeeded(o)) + " = max(peers, 1) (" + std::to_string(peers) +
         ") x 2 x link.recv_slots (" + std::to_string(o.link_recv_slots) + ") x link.slot_bytes (" +
         FormatBytes(o.link_slot_bytes) + ") + 64 MiB headroom";
}

}  // namespace

const char* VerdictName(Verdict verdict) {
  switch (verdict) {
    case Verdict::kOk:
      return "ok";
    case Verdict::kWarn:
      return "warn";
    case Verdict::kFail:
      return "fail";
    case Verdict::kSkip:
      return "skip";
  }
  return "fail";
}

uint64_t MemlockNeeded(const daemon::Options& options) {
  const uint64_t peers = std::max<uint64_t>(options.peers.size(), 1);
  return peers * 2 * options.link_recv_slots * options.link_slot_bytes + kMemlockHeadroom;
}

CheckResult CheckConfig(const ConfigInput& config) {
  if (!config.status.ok()) {
    const std::string file = config.path.empty() ? "the configuration" : config.path;
    return Judge("config", Verdict::kFail, "cannot use " + file,
                 config.status.message() + "; the checks below assume built-in defaults",
                 "correct " + file +
                     " (keys and defaults: systemd/rpcd.toml.example), then "
                     "`mcdma-rpcd --config " +
                     file + " --check` must say configuration OK");
  }
  if (config.path.empty()) {
    return Judge("config", Verdict::kOk, "no config file; defaults",
                 "no --config given and /etc/mcdma/rpcd.toml does not exist: the daemon's "
                 "built-in defaults apply (no fabric key, no peers)");
  }
  const auto& o = config.options;
  return Judge("config", Verdict::kOk, config.path + " loads and validates",
               "host id " + o.host_id + ", socket " + o.socket + ", " +
                   std::to_string(o.peers.size()) + " peer(s)" +
                   (o.fabric_key.empty() ? ", no fabric key" : ", fabric key " + o.fabric_key));
}

CheckResult CheckMemlock(const DoctorInputs& in) {
  const auto& o = in.config.options;
  if (ChooseDevice(in.devices, o) == nullptr) {
    return Judge("memlock", Verdict::kSkip, "no RDMA device (tcp links pin no memory)");
  }
  const auto& m = in.memlock;
  if (!m.status.ok()) {
    return Judge("memlock", Verdict::kWarn, "cannot read RLIMIT_MEMLOCK", m.status.ToString(),
                 "check `ulimit -l`");
  }
  const uint64_t need = MemlockNeeded(o);
  const std::string formula = MemlockFormula(o);
  const std::string source =
      "this shell's limit, which a daemon started from it inherits; under systemd the unit's "
      "LimitMEMLOCK applies";
  if (m.infinite) {
    return Judge("memlock", Verdict::kOk, "RLIMIT_MEMLOCK unlimited", formula + "; " + source);
  }
  const std::string have = FormatBytes(m.soft_bytes);
  if (m.soft_bytes >= need) {
    return Judge("memlock", Verdict::kOk, "RLIMIT_MEMLOCK " + have + " >= " + FormatBytes(need),
                 formula + "; " + source);
  }
  std::string fix =
      "ulimit -l unlimited, or LimitMEMLOCK=infinity in the systemd unit "
      "(systemd/mcdma-rpcd.service has it)";
  if (!m.hard_infinite && m.hard_bytes < need) {
    fix += "; the hard limit is " + FormatBytes(m.hard_bytes) +
           ", so raising it needs root (`* - memlock unlimited` in /etc/security/limits.conf)";
  }
  return Judge(
      "memlock", Verdict::kFail, "RLIMIT_MEMLOCK " + have + " < " + FormatBytes(need) + " needed",
      "memory registration pins the link buffers; the daemon " + formula + "; " + source, fix);
}

CheckResult CheckClock() {
  return Judge("clock", Verdict::kOk,
               "clock sync not needed: nothing compares timestamps across hosts",
               "deadlines and timeouts are measured on each host's own monotonic clock");
}

DarwinContext DarwinContextOf(const DoctorInputs& in) {
  const auto& o = in.config.options;
  DarwinContext ctx;
  for (const auto& d : in.devices.devices) ctx.devices.push_back(d.name);
  const driver::verbs::DeviceInfo* chosen = ChooseDevice(in.devices, o);
  if (chosen != nullptr) ctx.chosen_device = chosen->name;
  ctx.all_peers_tcp = !o.peers.empty() && std::all_of(o.peers.begin(), o.peers.end(),
                                                      [](auto& p) { return p.transport == "tcp"; });
  ctx.memlock_needed = MemlockNeeded(o);
  ctx.memlock_formula = MemlockFormula(o);
  for (const auto& p : o.peers) {
    // Validate() has checked every address; an unsplittable one is judged
    // as written.
    auto hp = daemon::SplitHostPort(p.address, daemon::kDefaultPeerPort);
    ctx.peers.push_back({p.name, hp.ok() ? hp->first : p.address});
  }
  return ctx;
}

std::vector<CheckResult> RunChecks(const DoctorInputs& in) {
  const bool mac = in.host_os == platform::Os::kMacOS;
  const DarwinContext ctx = mac ? DarwinContextOf(in) : DarwinContext();
  std::vector<CheckResult> out = {CheckConfig(in.config)};
  if (mac) {
    out.push_back(CheckThunderboltRdma(in.darwin, ctx));
    out.push_back(CheckCx5Kext(in.darwin, ctx));
  }
  out.push_back(CheckRdmaDevice(in));
  out.push_back(CheckPortActive(in));
  out.push_back(CheckGid(in));
  out.push_back(CheckProfile(in));
  if (mac) {
    out.push_back(CheckThunderboltBridge(in.darwin, ctx));
    out.push_back(CheckLaunchdMemlock(in.darwin, ctx));
    out.push_back(CheckPeerAddresses(in.darwin, ctx));
  } else {
    out.push_back(CheckMemlock(in));
  }
  out.push_back(CheckFabricKey(in));
  out.push_back(CheckDaemon(in));
  out.push_back(CheckBudgets(in));
  for (auto& r : CheckFabricStore(in)) out.push_back(std::move(r));
  for (auto& r : CheckPeers(in)) out.push_back(std::move(r));
  for (auto& r : CheckRdmaPorts(in)) out.push_back(std::move(r));
  for (auto& r : CheckPathMtu(in)) out.push_back(std::move(r));
  out.push_back(CheckClock());
  return out;
}

bool Healthy(const std::vector<CheckResult>& results) {
  return std::none_of(results.begin(), results.end(),
                      [](const CheckResult& r) { return r.verdict == Verdict::kFail; });
}

}  // namespace mcdma::tools::doctor
