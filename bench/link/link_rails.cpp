#include "link_rails.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>

#include "harness/child.hpp"
#include "harness/files.hpp"
#include "harness/hosts.hpp"
#include "harness/report.hpp"
#include "link_daemons.hpp"
#include "link_orchestrator.hpp"

namespace mcdma::bench {

// Named, not anonymous: the target is a unity build, and the other files'
// anonymous helpers (Fixed, Median, Has) would clash.
namespace rails_mode {

namespace {

using harness::Clock;
using harness::Millis;

constexpr Millis kCommandLimit(30000);
constexpr Millis kRailPoll(100);
// How long rail 1 may take to be up again on both ends after its restore.
constexpr Millis kRailBackWait(20000);
constexpr Millis kBackPoll(250);
// The most rail 0 may send while other rails are up and still count as
// unused: less than one slice (heartbeats and acks ride on the message rail).
constexpr uint64_t kRail0Slack = 256 << 10;

// The acceptance targets: N rails at least this many times one rail.
std::optional<double> TargetFor(int rails) {
  if (rails == 2) return 1.8;
  if (rails == 3) return 2.6;
  return std::nullopt;
}

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

std::string Fixed(double v, int digits) {
  char buf[64];
  snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

// "1.07 GB", "312 kB", "0 B" (10^3 steps).
std::string Decimal(uint64_t bytes) {
  if (bytes >= 1000000000) return Fixed(bytes / 1e9, 2) + " GB";
  if (bytes >= 1000000) return Fixed(bytes / 1e6, 1) + " MB";
  if (bytes >= 1000) return Fixed(bytes / 1e3, 1) + " kB";
  return std::to_string(bytes) + " B";
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

// Commands run by execv: whole paths.
std::string Tool(const char* name) {
  for (const char* dir : {"/bin/", "/usr/bin/", "/sbin/", "/usr/sbin/"}) {
    std::string path = std::string(dir) + name;
    if (access(path.c_str(), X_OK) == 0) return path;
  }
  std::string found = harness::FindInPath(name);
  return found.empty() ? name : found;
}
const std::string& Bash() {
  static const std::string kPath = Tool("bash");
  return kPath;
}
const std::string& Ip() {
  static const std::string kPath = Tool("ip");
  return kPath;
}

bool Has(const std::vector<std::string>& list, const std::string& key) {
  return std::find(list.begin(), list.end(), key) != list.end();
}

std::string Oneline(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s;
}

// ---- what is read from the machine -------------------------------------

// One rail as `mcdmactl links --json` shows it.
struct RailCount {
  uint32_t index = 0;
  std::string name;
  std::string state;
  bool last_resort = false;
  uint64_t sent = 0;
  uint64_t slices = 0;
  uint64_t reissued = 0;
  uint64_t downs = 0;
  double mbps = 0;
  double share = 0;
};

// Both hosts' view of their link to each other, rail by rail; an error
// when either cannot be read or lists no link.
Result<std::vector<RailCount>> ReadRails(const LinkPlan& plan, const DaemonPair& pair,
                                         const harness::Hosts& hosts, size_t host) {
  MCDMA_ASSIGN_OR_RETURN(v1::LinksReply links, pair.Links(plan, host));
  const std::string& peer = hosts[1 - host].id;
  const v1::LinkInfo* link = harness::FindLink(links, peer);
  if (link == nullptr) return Status(Code::kNotFound, hosts[host].id + " lists no link to " + peer);
  std::vector<RailCount> rails;
  for (const v1::RailInfo& r : link->rails()) {
    rails.push_back(RailCount{r.index(), r.name(), r.state(), r.last_resort(), r.bytes_sent(),
                              r.slices(), r.slices_reissued(), r.downs(), r.throughput_mbps(),
                              r.share()});
  }
  return rails;
}

// Rails 1.. up in `rails`.
int RailsUp(const std::vector<RailCount>& rails) {
  int up = 0;
  for (const RailCount& r : rails) up += r.index > 0 && r.state == "up";
  return up;
}

// "rail 0 up (last resort), rail 1 tcp:10.241.5.1>10.241.5.2 probing, ..."
std::string DescribeRails(const std::vector<RailCount>& rails) {
  std::string out;
  for (const RailCount& r : rails) {
    out += (out.empty() ? "" : ", ") + std::string("rail ") + std::to_string(r.index) + " " +
           (r.name.empty() ? "(link)" : r.name) + " " + r.state +
           (r.last_resort ? " (last resort)" : "");
  }
  return out.empty() ? "no rails listed" : out;
}

// The interface holding `address` in `netns` (`ip -o -4 addr show to`).
Result<std::string> InterfaceOf(const std::string& netns, const std::string& address) {
  harness::CommandResult r = harness::RunCommand(
      {Ip(), "-n", netns, "-o", "-4", "addr", "show", "to", address + "/32"}, kCommandLimit);
  std::istringstream in(r.out);
  std::string index, name;
  in >> index >> name;
  if (r.exit_code() != 0 || name.empty()) {
    return Status(Code::kNotFound, "no interface holds " + address + " in " + netns + " (" +
                                       harness::LastLine(r.err + r.out) + ")");
  }
  return name;
}

// tx_bytes of each interface in `netns`, in order; empty when unreadable.
std::vector<uint64_t> TxBytes(const std::string& netns, const std::vector<std::string>& ifs) {
  std::vector<std::string> argv = {Ip(), "netns", "exec", netns, "cat"};
  for (const std::string& i : ifs) argv.push_back("/sys/class/net/" + i + "/statistics/tx_bytes");
  harness::CommandResult r = harness::RunCommand(argv, kCommandLimit);
  std::vector<uint64_t> out;
  std::istringstream in(r.out);
  uint64_t v;
  while (in >> v) out.push_back(v);
  if (r.exit_code() != 0 || out.size() != ifs.size()) out.clear();
  return out;
}

// CPU time: the whole machine (/proc/stat, clock ticks) and one process.
struct CpuSample {
  uint64_t busy = 0;
  uint64_t total = 0;
};

CpuSample MachineCpu() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  in >> cpu;
  std::vector<uint64_t> f;
  uint64_t v;
  for (int i = 0; i < 8 && in >> v; ++i) f.push_back(v);
  CpuSample s;
  if (cpu != "cpu" || f.size() < 5) return s;
  for (uint64_t x : f) s.total += x;
  s.busy = s.total - f[3] - f[4];  // minus idle and iowait
  return s;
}

// utime + stime of `pid` in clock ticks; 0 when it cannot be read.
uint64_t ProcessTicks(pid_t pid) {
  if (pid <= 0) return 0;
  std::string text = harness::ReadFile("/proc/" + std::to_string(pid) + "/stat");
  size_t paren = text.rfind(')');
  if (paren == std::string::npos) return 0;
  std::istringstream in(text.substr(paren + 2));
  std::string field;
  uint64_t utime = 0, stime = 0;
  // Fields 3.. after the command; utime and stime are fields 14 and 15.
  for (int i = 3; i <= 15 && in >> field; ++i) {
    if (i == 14) utime = strtoull(field.c_str(), nullptr, 10);
    if (i == 15) stime = strtoull(field.c_str(), nullptr, 10);
  }
  return utime + stime;
}

// "0.52 0.61 0.70" from /proc/loadavg.
std::string LoadAverage() {
  std::istringstream in(harness::ReadFile("/proc/loadavg"));
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}

// ---- the setup -----------------------------------------------------------

struct Rail {
  std::string address[2];  // host A's end, host B's end
  std::string interface[2];
};

struct Setup {
  std::unique_ptr<harness::Hosts> hosts;
  std::vector<Rail> rails;          // rail k at rails[k - 1]
  std::string own_interface[2];     // rail 0's veth, each end
  std::vector<std::string> ifs[2];  // per host: own veth, then rail 1.. (TxBytes order)
};

Result<Setup> MakeSetup(const RailsOptions& o) {
  Setup s;
  const std::string prefix = "mcbr" + std::to_string(getpid());
  MCDMA_ASSIGN_OR_RETURN(s.hosts, harness::Hosts::MakeNamespaces(o.hosts_script, prefix, 2));
  s.hosts->RemoveOnSignals();
  std::vector<std::string> argv = {Bash(), o.hosts_script, "rails", prefix,
                                   std::to_string(o.max_rails)};
  if (o.rate != "none") argv.push_back(o.rate);
  harness::CommandResult r = harness::RunCommand(argv, kCommandLimit);
  if (r.exit_code() != 0) {
    return Status(Code::kInternal,
                  "hosts.sh rails: " + r.Describe() + ": " + harness::LastLine(r.err + r.out));
  }
  std::istringstream lines(r.out);
  Rail rail;
  while (lines >> rail.address[0] >> rail.address[1]) s.rails.push_back(rail);
  if (s.rails.size() != static_cast<size_t>(o.max_rails)) {
    return Status(Code::kInternal, "hosts.sh rails printed " + std::to_string(s.rails.size()) +
                                       " rails, not " + std::to_string(o.max_rails) + ": " +
                                       Oneline(r.out));
  }
  for (size_t h = 0; h < 2; ++h) {
    const harness::Host& host = (*s.hosts)[h];
    MCDMA_ASSIGN_OR_RETURN(s.own_interface[h], InterfaceOf(host.netns, host.address));
    s.ifs[h].push_back(s.own_interface[h]);
    for (Rail& k : s.rails) {
      MCDMA_ASSIGN_OR_RETURN(k.interface[h], InterfaceOf(host.netns, k.address[h]));
      s.ifs[h].push_back(k.interface[h]);
    }
  }
  return s;
}

// Everything counted before and after a measurement.
struct Snapshot {
  std::vector<RailCount> rails[2];
  std::string error;  // why `rails` could not be read
  std::vector<uint64_t> tx[2];
  CpuSample cpu;
  uint64_t daemon_ticks = 0;
  Clock::time_point at;
};

Snapshot Take(const LinkPlan& plan, const DaemonPair& pair, const Setup& s) {
  Snapshot snap;
  for (size_t h = 0; h < 2; ++h) {
    auto rails = ReadRails(plan, pair, *s.hosts, h);
    if (rails.ok()) {
      snap.rails[h] = std::move(*rails);
    } else {
      snap.error = rails.status().message();
    }
    snap.tx[h] = TxBytes((*s.hosts)[h].netns, s.ifs[h]);
  }
  snap.cpu = MachineCpu();
  snap.daemon_ticks = ProcessTicks(pair.pid(0)) + ProcessTicks(pair.pid(1));
  snap.at = Clock::now();
  return snap;
}

// What the rail named `name` did on host `h` between two snapshots
// (zeros and the name when `after` does not list it).
RailCount Delta(const Snapshot& before, const Snapshot& after, size_t h, const std::string& name) {
  RailCount d;
  d.name = name;
  auto find = [&](const std::vector<RailCount>& rails) -> const RailCount* {
    for (const RailCount& r : rails) {
      if (r.name == name) return &r;
    }
    return nullptr;
  };
  const RailCount* b = find(before.rails[h]);
  const RailCount* a = find(after.rails[h]);
  if (a == nullptr) return d;
  d = *a;
  if (b != nullptr) {
    d.sent -= std::min(d.sent, b->sent);
    d.slices -= std::min(d.slices, b->slices);
    d.reissued -= std::min(d.reissued, b->reissued);
    d.downs -= std::min(d.downs, b->downs);
  }
  return d;
}

// The daemons' name of the pair that is rail k (1..) of the setup, as
// host h lists it: its own address first ("tcp:10.241.5.1>tcp:10.241.5.2").
// Rail 0 is "link". The daemons number the pairs themselves: every pair of
// the two hosts' --rail addresses is listed (N x N), the ones across two
// different veths stay down.
std::string PairName(const Setup& s, size_t k, size_t h) {
  if (k == 0) return "link";
  const Rail& r = s.rails[k - 1];
  return "tcp:" + r.address[h] + ">tcp:" + r.address[1 - h];
}

// Waits until both hosts list `n` rails (1..n) up; the seconds it took.
Result<double> WaitForRails(const LinkPlan& plan, DaemonPair& pair, const harness::Hosts& hosts,
                            int n, Millis limit) {
  auto start = Clock::now();
  std::string state[2] = {"(not read)", "(not read)"};
  while (Clock::now() < start + limit) {
    if (std::string gone = pair.Exited(); !gone.empty()) return Status(Code::kUnavailable, gone);
    int ready = 0;
    for (size_t h = 0; h < 2; ++h) {
      auto rails = ReadRails(plan, pair, hosts, h);
      if (!rails.ok()) {
        state[h] = harness::LastLine(rails.status().message());
        continue;
      }
      state[h] = DescribeRails(*rails);
      int up = RailsUp(*rails);
      if (up > n) {
        return Status(Code::kInternal, hosts[h].id + " lists " + std::to_string(up) +
                                           " rails up, more than the " + std::to_string(n) +
                                           " given: " + state[h]);
      }
      ready += up == n;
    }
    if (ready == 2) return Seconds(Clock::now() - start);
    std::this_thread::sleep_for(kRailPoll);
  }
  return Status(Code::kTimeout, std::to_string(n) + " rail(s) not up on both ends within " +
                                    Fixed(Seconds(limit), 0) + " s: " + hosts[0].id + ": " +
                                    state[0] + "; " + hosts[1].id + ": " + state[1]);
}

// ---- results ---------------------------------------------------------------

struct Transfer {
  bool ran = false;
  bool ok = false;
  std::string error;
  std::vector<double> write_mbps;  // A -> B, one per timed transfer
  std::vector<double> read_mbps;   // B -> A
};

struct CutResult {
  bool ran = false;
  bool ok = false;
  std::string error;
  double write_mbps = 0;
  double read_mbps = 0;
  double planned_cut_s = 0;  // after the WriteBatch began
  double cut_s = -1;         // when it was cut (-1: not cut)
  double restored_s = -1;
  std::string cut_error;     // hosts.sh cut-rail/restore-rail failures
  double back_after_s = -1;  // rail 1 up on both ends again, after the restore
  std::string back_state;    // when it was not
  uint64_t reissued[2] = {0, 0};
  uint64_t rail1_downs = 0;  // host A
  uint64_t rail0_sent[2] = {0, 0};
};

struct RailsRun {
  int rails = 0;
  std::string link_note;  // "3 rails up 0.6 s after the link"
  Transfer daemon;
  Transfer tcp;
  // The daemon transfers' counters.
  bool counted = false;
  std::string count_error;
  RailCount rail0[2];
  std::vector<RailCount> used[2];  // rails 1..N, by name
  int cross_pairs = 0;             // other pairs host-a lists (across two veths)
  uint64_t cross_sent = 0;         // what they sent, both hosts
  std::vector<std::string> cross_up;
  bool tx_counted = true;       // the interface counters below could be read
  uint64_t unused_tx = 0;       // rails N+1.. interfaces, both ends
  uint64_t own_tx[2] = {0, 0};  // rail 0's veth, each end (also the peer service)
  double daemon_cpu = -1;       // % of one CPU while transferring
  double machine_busy = -1;     // % of all CPUs over the whole run of the pair
  CutResult cut;
  bool Rail0Unused() const {
    return counted && rail0[0].slices + rail0[1].slices == 0 &&
           rail0[0].sent + rail0[1].sent < kRail0Slack;
  }
};

std::vector<double> Rates(const harness::SampleSet& set, uint64_t bytes) {
  std::vector<double> mbps;
  mbps.reserve(set.nanos.size());
  for (uint64_t ns : set.nanos) mbps.push_back(static_cast<double>(bytes) * 1e3 / ns);
  return mbps;
}

void Fill(Transfer& t, Result<std::vector<harness::SampleSet>> sets, uint64_t bytes) {
  t.ran = true;
  if (!sets.ok()) {
    t.error = Oneline(sets.status().message());
    return;
  }
  t.ok = true;
  t.write_mbps = Rates((*sets)[0], bytes);
  t.read_mbps = Rates((*sets)[1], bytes);
}

// ---- one N -----------------------------------------------------------------

class RailsBench {
 public:
  RailsBench(const RailsOptions& o, LinkPlan plan, const Setup& s)
      : o_(o), plan_(std::move(plan)), s_(s), hosts_(*s.hosts) {}

  RailsRun Run(int n) {
    RailsRun run;
    run.rails = n;
    // A fresh directory per rail count: the daemons' fabric key and
    // sockets, the samples, the endpoints' stderr.
    dir_ = std::make_unique<harness::TempDir>("mcdma-bench-rails");
    if (!dir_->ok()) {
      Failed(std::to_string(n) + " rail(s)", dir_->error());
      return run;
    }
    if (Has(o_.mechanisms, "tcp")) RawTcp(run);
    if (Has(o_.mechanisms, "daemon")) Daemons(run);
    return run;
  }

  bool failed = false;

 private:
  // "A1>B1,A2>B2" for the client, "B1,B2" for the server: rails 1..n.
  std::string RailList(int n, bool client) const {
    std::string out;
    for (int k = 0; k < n; ++k) {
      const Rail& r = s_.rails[k];
      out += (out.empty() ? "" : ",") + (client ? r.address[0] + ">" + r.address[1] : r.address[1]);
    }
    return out;
  }

  void RawTcp(RailsRun& run) {
    fprintf(stderr, "mcdma_bench_link rails: %d rail(s): raw TCP, one stream per rail ...\n",
            run.rails);
    LinkPair pair;
    pair.key = "rails-tcp-" + std::to_string(run.rails);
    pair.server_role = "tcp-rails-server";
    pair.client_role = "tcp-rails-client";
    pair.server_args = {"--rails", RailList(run.rails, false)};
    pair.client_args = {"--rails", RailList(run.rails, true)};
    pair.ready_timeout = std::chrono::seconds(60);  // allocates and touches the buffer
    pair.expect_sets = 2;
    pair.expect_samples = static_cast<size_t>(plan_.repeats);
    Fill(run.tcp, RunLinkPair(plan_, hosts_, *dir_, std::move(pair)), plan_.bulk_bytes);
    if (!run.tcp.ok)
      Failed("raw TCP over " + std::to_string(run.rails) + " rail(s)", run.tcp.error);
  }

  void Failed(const std::string& what, const std::string& why) {
    failed = true;
    fprintf(stderr, "mcdma_bench_link rails: %s failed: %s\n", what.c_str(), why.c_str());
  }

  LinkPair DaemonBulk(const DaemonPair& pair, const std::string& key, const std::string& client) {
    LinkPair run;
    run.key = key;
    run.server_role = "daemon-bulk-server";
    run.client_role = client;
    run.server_args = {"--socket", pair.socket_b(), "--peer", hosts_[0].id};
    run.client_args = {"--socket", pair.socket_a(), "--peer", hosts_[1].id};
    run.ready_timeout = std::chrono::seconds(60);  // allocates and touches the buffer
    run.expect_sets = 2;
    return run;
  }

  void Daemons(RailsRun& run) {
    const int n = run.rails;
    const std::string what = "daemons over " + std::to_string(n) + " rail(s)";
    fprintf(stderr, "mcdma_bench_link rails: %d rail(s): starting the daemons ...\n", n);
    LinkPlan plan = plan_;
    plan.host_rails.assign(2, {});
    for (int k = 0; k < n; ++k) {
      for (size_t h = 0; h < 2; ++h) plan.host_rails[h].push_back(s_.rails[k].address[h]);
    }
    if (!o_.log_dir.empty()) {
      plan.daemon_log_dir = o_.log_dir + "/rails-" + std::to_string(n);
      mkdir(plan.daemon_log_dir.c_str(), 0755);
    }
    auto started = DaemonPair::Start(plan, hosts_, *dir_);
    run.daemon.ran = true;
    if (!started.ok()) {
      run.daemon.error = "daemons: " + Oneline(started.status().message());
      return Failed(what, run.daemon.error);
    }
    DaemonPair& pair = **started;
    auto up = WaitForRails(plan, pair, hosts_, n, Millis(plan.link_wait_ms));
    if (!up.ok()) {
      run.daemon.error = Oneline(up.status().message());
      Failed(what, run.daemon.error);
      fprintf(stderr, "%s", pair.LogTails(10).c_str());
      return;
    }
    run.link_note = pair.note() + "; " + std::to_string(n) + " rail(s) up on both ends " +
                    Fixed(*up, 1) + " s later";
    fprintf(stderr, "mcdma_bench_link rails: %s\n", run.link_note.c_str());

    fprintf(stderr, "mcdma_bench_link rails: %d rail(s): daemon WriteBatch/ReadBatch ...\n", n);
    Snapshot before = Take(plan, pair, s_);
    LinkPair bulk = DaemonBulk(pair, "rails-daemon-" + std::to_string(n), "daemon-bulk-client");
    bulk.expect_samples = static_cast<size_t>(plan.repeats);
    Fill(run.daemon, RunLinkPair(plan, hosts_, *dir_, std::move(bulk)), plan.bulk_bytes);
    Snapshot after = Take(plan, pair, s_);
    if (!run.daemon.ok) {
      Failed(what, run.daemon.error);
      fprintf(stderr, "%s", pair.LogTails(10).c_str());
    }
    Count(run, before, after);
    if (run.daemon.ok &&
        std::find(o_.cut_rails.begin(), o_.cut_rails.end(), n) != o_.cut_rails.end())
      Cut(run, plan, pair);
    if (std::string gone = pair.Exited(); !gone.empty()) Failed(what, gone);
  }

  // Rail 0, the rails in use, the unused rails' interfaces and the CPU
  // over the daemon transfers.
  void Count(RailsRun& run, const Snapshot& before, const Snapshot& after) {
    const int n = run.rails;
    if (!before.error.empty() || !after.error.empty()) {
      run.count_error = before.error.empty() ? after.error : before.error;
      return;
    }
    run.counted = true;
    for (size_t h = 0; h < 2; ++h) {
      run.rail0[h] = Delta(before, after, h, PairName(s_, 0, h));
      for (int k = 1; k <= n; ++k)
        run.used[h].push_back(Delta(before, after, h, PairName(s_, k, h)));
      // Every other pair listed: across two veths, never up.
      for (const RailCount& r : after.rails[h]) {
        bool known = r.index == 0;
        for (int k = 1; k <= n; ++k) known = known || r.name == PairName(s_, k, h);
        if (known) continue;
        RailCount d = Delta(before, after, h, r.name);
        run.cross_pairs += h == 0;
        run.cross_sent += d.sent;
        if (r.state == "up") run.cross_up.push_back(r.name);
      }
      if (before.tx[h].empty() || after.tx[h].size() != before.tx[h].size()) {
        run.tx_counted = false;
        continue;
      }
      run.own_tx[h] = after.tx[h][0] - before.tx[h][0];
      for (size_t k = static_cast<size_t>(n) + 1; k < after.tx[h].size(); ++k)
        run.unused_tx += after.tx[h][k] - before.tx[h][k];
    }
    if (!run.daemon.ok) return;
    // Time spent transferring: the timed transfers and the untimed round
    // before them (about one median each way).
    double transfer_s = 0;
    for (double mbps : run.daemon.write_mbps) transfer_s += plan_.bulk_bytes / (mbps * 1e6);
    for (double mbps : run.daemon.read_mbps) transfer_s += plan_.bulk_bytes / (mbps * 1e6);
    transfer_s += plan_.bulk_bytes / (Median(run.daemon.write_mbps) * 1e6) +
                  plan_.bulk_bytes / (Median(run.daemon.read_mbps) * 1e6);
    const double hz = static_cast<double>(sysconf(_SC_CLK_TCK));
    run.daemon_cpu = (after.daemon_ticks - before.daemon_ticks) / hz / transfer_s * 100;
    uint64_t total = after.cpu.total - before.cpu.total;
    if (total > 0) run.machine_busy = 100.0 * (after.cpu.busy - before.cpu.busy) / total;
  }

  void Cut(RailsRun& run, const LinkPlan& plan, DaemonPair& pair) {
    const int n = run.rails;
    CutResult& cut = run.cut;
    cut.ran = true;
    const double expected_s = plan.bulk_bytes / (Median(run.daemon.write_mbps) * 1e6);
    cut.planned_cut_s = expected_s / 2;
    fprintf(stderr,
            "mcdma_bench_link rails: %d rail(s): WriteBatch with rail 1 cut after %.1f s, "
            "restored %.1f s later ...\n",
            n, cut.planned_cut_s, o_.restore_after_ms / 1000.0);
    const std::string marker = dir_->Join("cut-" + std::to_string(n) + ".started");
    const std::string prefix = hosts_.prefix();
    Snapshot before = Take(plan, pair, s_);
    std::atomic<bool> done{false};
    std::thread cutter([&] {
      auto limit = Clock::now() + Millis(plan.run_limit_ms);
      while (!done && access(marker.c_str(), F_OK) != 0 && Clock::now() < limit)
        std::this_thread::sleep_for(Millis(2));
      if (done || Clock::now() >= limit) return;
      const auto start = Clock::now();
      const auto when = start + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(cut.planned_cut_s));
      while (!done && Clock::now() < when) std::this_thread::sleep_for(Millis(2));
      if (done) return;  // the transfer ended first
      harness::CommandResult c =
          harness::RunCommand({Bash(), o_.hosts_script, "cut-rail", prefix, "1"}, kCommandLimit);
      cut.cut_s = Seconds(Clock::now() - start);
      if (c.exit_code() != 0) cut.cut_error = "cut-rail: " + harness::LastLine(c.err + c.out);
      std::this_thread::sleep_for(Millis(o_.restore_after_ms));
      harness::CommandResult r = harness::RunCommand(
          {Bash(), o_.hosts_script, "restore-rail", prefix, "1"}, kCommandLimit);
      const auto restored = Clock::now();
      cut.restored_s = Seconds(restored - start);
      if (r.exit_code() != 0) cut.cut_error += " restore-rail: " + harness::LastLine(r.err + r.out);
      // Rail 1 back on both ends: polled while the transfer may still run.
      std::string state;
      while (Clock::now() < restored + kRailBackWait) {
        int ready = 0;
        state.clear();
        for (size_t h = 0; h < 2; ++h) {
          auto rails = ReadRails(plan, pair, hosts_, h);
          ready += rails.ok() && RailsUp(*rails) == n;
          state += (h ? "; " : "") + hosts_[h].id + ": " +
                   (rails.ok() ? DescribeRails(*rails) : rails.status().message());
        }
        if (ready == 2) {
          cut.back_after_s = Seconds(Clock::now() - restored);
          break;
        }
        std::this_thread::sleep_for(kBackPoll);
      }
      if (cut.back_after_s < 0) cut.back_state = Oneline(state);
    });
    LinkPair transfer = DaemonBulk(pair, "rails-cut-" + std::to_string(n), "rails-cut-client");
    transfer.client_args.insert(transfer.client_args.end(), {"--marker", marker});
    transfer.expect_samples = 1;
    auto sets = RunLinkPair(plan, hosts_, *dir_, std::move(transfer));
    done = true;
    cutter.join();
    if (!sets.ok()) {
      cut.error = Oneline(sets.status().message());
      Failed("the cut transfer over " + std::to_string(n) + " rail(s)", cut.error);
      fprintf(stderr, "%s", pair.LogTails(10).c_str());
    } else {
      cut.ok = true;
      cut.write_mbps = Rates((*sets)[0], plan.bulk_bytes)[0];
      cut.read_mbps = Rates((*sets)[1], plan.bulk_bytes)[0];
    }
    if (cut.cut_s < 0) {
      cut.cut_error = "the transfer ended before the cut was due";
    } else if (!cut.cut_error.empty()) {
      Failed("cutting rail 1", cut.cut_error);
    }
    Snapshot after = Take(plan, pair, s_);
    if (before.error.empty() && after.error.empty()) {
      for (size_t h = 0; h < 2; ++h) {
        for (const RailCount& r : after.rails[h])
          cut.reissued[h] += Delta(before, after, h, r.name).reissued;
        cut.rail0_sent[h] = Delta(before, after, h, PairName(s_, 0, h)).sent;
      }
      cut.rail1_downs = Delta(before, after, 0, PairName(s_, 1, 0)).downs;
    }
  }

  const RailsOptions& o_;
  const LinkPlan plan_;
  const Setup& s_;
  const harness::Hosts& hosts_;
  std::unique_ptr<harness::TempDir> dir_;  // this rail count's
};

// ---- the report ------------------------------------------------------------

std::string Range(const std::vector<double>& v) {
  if (v.empty()) return "";
  auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  return "(" + Fixed(*lo, 1) + " - " + Fixed(*hi, 1) + ")";
}

struct Verdicts {
  bool all_measured = true;
  bool all_pass = true;
};

void PrintTable(const std::vector<RailsRun>& runs, Verdicts& v) {
  printf("%-6s %-11s %12s %-17s %9s %12s %10s %9s %7s\n", "rails", "direction", "daemon MB/s",
         "  (min - max)", "x 1 rail", "raw TCP MB/s", "daemon/raw", "target", "verdict");
  const RailsRun* one = nullptr;
  for (const RailsRun& r : runs) {
    if (r.rails == 1) one = &r;
  }
  for (const RailsRun& r : runs) {
    for (int dir = 0; dir < 2; ++dir) {
      const char* label = dir == 0 ? "write A->B" : "read B->A";
      auto pick = [&](const Transfer& t) -> const std::vector<double>& {
        return dir == 0 ? t.write_mbps : t.read_mbps;
      };
      std::string daemon = "-", range, ratio = "-", raw = "-", vs_raw = "-", target = "-",
                  verdict = "-";
      std::optional<double> goal = TargetFor(r.rails);
      if (goal) target = ">= " + Fixed(*goal, 2) + "x";
      if (r.tcp.ok) raw = Fixed(Median(pick(r.tcp)), 1);
      if (r.daemon.ok) {
        double med = Median(pick(r.daemon));
        daemon = Fixed(med, 1);
        range = Range(pick(r.daemon));
        if (r.tcp.ok) vs_raw = Fixed(med / Median(pick(r.tcp)), 2) + "x";
        if (one != nullptr && one->daemon.ok) {
          double x = med / Median(pick(one->daemon));
          ratio = Fixed(x, 2) + "x";
          if (goal) {
            verdict = x >= *goal ? "PASS" : "FAIL";
            v.all_pass = v.all_pass && x >= *goal;
          }
        } else if (goal) {
          verdict = "FAIL";  // not measured
          v.all_measured = false;
        }
      } else if (r.daemon.ran) {
        daemon = "FAILED";
        if (goal) {
          verdict = "FAIL";
          v.all_measured = false;
        }
      }
      printf("%-6d %-11s %12s %-17s %9s %12s %10s %9s %7s\n", r.rails, label, daemon.c_str(),
             range.empty() ? "" : ("  " + range).c_str(), ratio.c_str(), raw.c_str(),
             vs_raw.c_str(), target.c_str(), verdict.c_str());
    }
  }
  for (const RailsRun& r : runs) {
    if (r.daemon.ran && !r.daemon.ok)
      printf("  %d rail(s), daemons: FAILED: %s\n", r.rails, r.daemon.error.c_str());
    if (r.tcp.ran && !r.tcp.ok)
      printf("  %d rail(s), raw TCP: FAILED: %s\n", r.rails, r.tcp.error.c_str());
  }
}

void PrintDetails(const std::vector<RailsRun>& runs, int max_rails) {
  for (const RailsRun& r : runs) {
    if (!r.daemon.ran) continue;
    printf("%d rail(s): %s\n", r.rails, r.link_note.empty() ? "rails not up" : r.link_note.c_str());
    if (!r.counted) {
      if (!r.count_error.empty()) printf("  counters not read: %s\n", r.count_error.c_str());
      continue;
    }
    printf(
        "  rail 0 (the link's own veth, not limited): host-a sent %s in %llu slices, host-b sent "
        "%s in %llu slices: %s\n",
        Decimal(r.rail0[0].sent).c_str(), static_cast<unsigned long long>(r.rail0[0].slices),
        Decimal(r.rail0[1].sent).c_str(), static_cast<unsigned long long>(r.rail0[1].slices),
        r.Rail0Unused() ? "unused" : "CARRIED TRAFFIC");
    uint64_t total = 0;
    for (size_t h = 0; h < 2; ++h) {
      for (const RailCount& c : r.used[h]) total += c.sent;
    }
    for (size_t k = 0; k < r.used[0].size(); ++k) {
      const RailCount& a = r.used[0][k];
      const RailCount& b = r.used[1][k];
      double part = total ? 100.0 * (a.sent + b.sent) / total : 0;
      printf(
          "  rail %zu = daemon rail %u %s (%s): host-a sent %s, host-b sent %s (%.0f%% of the "
          "rails' bytes), %llu + %llu slices; last measured %.1f / %.1f MB/s\n",
          k + 1, a.index, a.name.c_str(), a.state.c_str(), Decimal(a.sent).c_str(),
          Decimal(b.sent).c_str(), part, static_cast<unsigned long long>(a.slices),
          static_cast<unsigned long long>(b.slices), a.mbps, b.mbps);
    }
    if (r.cross_pairs > 0) {
      printf("  the other %d pair(s) host-a lists (across two veths): %s sent%s\n", r.cross_pairs,
             Decimal(r.cross_sent).c_str(),
             r.cross_up.empty() ? ", none up" : (", UP: " + r.cross_up[0]).c_str());
    }
    if (!r.tx_counted) {
      printf(
          "  interface counters: not read (ip netns exec ... cat /sys/class/net/.../tx_bytes "
          "failed)\n");
    } else if (r.rails < max_rails) {
      std::string which = r.rails + 1 == max_rails ? "rail " + std::to_string(max_rails)
                                                   : "rails " + std::to_string(r.rails + 1) + "-" +
                                                         std::to_string(max_rails);
      printf("  unused %s (no --rail): %s sent on their interfaces, both ends\n", which.c_str(),
             Decimal(r.unused_tx).c_str());
    }
    if (r.tx_counted) {
      printf("  rail 0's veth sent %s (host-a) and %s (host-b), peer service included\n",
             Decimal(r.own_tx[0]).c_str(), Decimal(r.own_tx[1]).c_str());
    }
    if (r.daemon_cpu >= 0) {
      printf(
          "  CPU: the two daemons used %.0f%% of one CPU while transferring; the machine's CPUs "
          "were %.0f%% busy over the pair's run (apps' pattern fill and check and any other "
          "process included)\n",
          r.daemon_cpu, r.machine_busy);
    }
  }
}

// What the wires allowed the cut transfer, given when rail 1 went and came
// back: the uncut rate until the cut, (N-1)/N of it until rail 1 was up
// again, the uncut rate after. 0 where it does not apply (one rail: rail 0
// takes over; not cut).
double CutBound(const RailsRun& r, uint64_t bytes) {
  const CutResult& c = r.cut;
  if (r.rails < 2 || c.cut_s < 0 || c.restored_s < 0) return 0;
  const double full = Median(r.daemon.write_mbps) * 1e6;  // B/s
  const double part = full * (r.rails - 1) / r.rails;
  double t = c.cut_s;
  double left = static_cast<double>(bytes) - full * c.cut_s;
  if (left <= 0) return 0;
  const double outage = c.back_after_s < 0 ? 1e18 : c.restored_s - c.cut_s + c.back_after_s;  // s
  if (part * outage >= left) {
    t += left / part;
  } else {
    t += outage + (left - part * outage) / full;
  }
  return bytes / t / 1e6;
}

void PrintCuts(const std::vector<RailsRun>& runs, uint64_t bytes, int restore_ms) {
  bool any = false;
  for (const RailsRun& r : runs) any = any || r.cut.ran;
  if (!any) return;
  printf(
      "\nrail 1 cut half-way through a WriteBatch (hosts.sh cut-rail at half the uncut median's "
      "time, restore-rail %.1f s later); one %s transfer, then read back and byte-verified\n",
      restore_ms / 1000.0, harness::FormatBytes(bytes).c_str());
  printf("%-6s %11s %9s %11s %9s %10s %16s %15s %10s %-9s\n", "rails", "write MB/s", "vs uncut",
         "bound MB/s", "cut at", "restored", "slices reissued", "rail 1 back in", "read MB/s",
         "verified");
  for (const RailsRun& r : runs) {
    if (!r.cut.ran) continue;
    const CutResult& c = r.cut;
    if (!c.ok) {
      printf("%-6d FAILED: %s\n", r.rails, c.error.c_str());
      continue;
    }
    std::string cut_at = c.cut_s < 0 ? "not cut" : Fixed(c.cut_s, 2) + " s";
    std::string restored = c.restored_s < 0 ? "-" : Fixed(c.restored_s, 2) + " s";
    std::string back = c.back_after_s < 0 ? "not back" : Fixed(c.back_after_s, 1) + " s";
    double bound = CutBound(r, bytes);
    std::string bound_text = bound > 0 ? Fixed(bound, 1) : "-";
    printf("%-6d %11.1f %8.2fx %11s %9s %10s %16llu %15s %10.1f %-9s\n", r.rails, c.write_mbps,
           c.write_mbps / Median(r.daemon.write_mbps), bound_text.c_str(), cut_at.c_str(),
           restored.c_str(), static_cast<unsigned long long>(c.reissued[0]) + c.reissued[1],
           back.c_str(), c.read_mbps, "yes");
  }
  for (const RailsRun& r : runs) {
    if (!r.cut.ran) continue;
    const CutResult& c = r.cut;
    printf(
        "  %d rail(s): reissued host-a %llu, host-b %llu; rail 1 went down %llu time(s) on "
        "host-a; rail 0 sent %s / %s",
        r.rails, static_cast<unsigned long long>(c.reissued[0]),
        static_cast<unsigned long long>(c.reissued[1]),
        static_cast<unsigned long long>(c.rail1_downs), Decimal(c.rail0_sent[0]).c_str(),
        Decimal(c.rail0_sent[1]).c_str());
    if (!c.cut_error.empty()) printf("; %s", c.cut_error.c_str());
    if (!c.back_state.empty()) printf("; rail 1 not back: %s", c.back_state.c_str());
    printf("\n");
  }
}

std::string JsonNumbers(const std::vector<double>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + Fixed(v[i], 2);
  return out + "]";
}

Status WriteJson(const std::string& path, const RailsOptions& o, const std::string& setup,
                 const std::vector<RailsRun>& runs) {
  using harness::JsonQuote;
  std::string j = "{\n  \"benchmark\": \"link-rails\",\n";
  j += "  \"setup\": " + JsonQuote(setup) + ",\n";
  j += "  \"rate\": " + JsonQuote(o.rate) + ",\n";
  j += "  \"bytes\": " + std::to_string(o.bytes) + ",\n";
  j += "  \"op_bytes\": " + std::to_string(o.op_bytes) + ",\n";
  j += "  \"repeats\": " + std::to_string(o.repeats) + ",\n  \"rows\": [\n";
  for (size_t i = 0; i < runs.size(); ++i) {
    const RailsRun& r = runs[i];
    auto transfer = [&](const Transfer& t) {
      if (!t.ran) return std::string("null");
      if (!t.ok) return "{\"ok\": false, \"error\": " + JsonQuote(t.error) + "}";
      return "{\"ok\": true, \"write_mbps\": " + JsonNumbers(t.write_mbps) +
             ", \"read_mbps\": " + JsonNumbers(t.read_mbps) + "}";
    };
    j += "    {\"rails\": " + std::to_string(r.rails) + ", \"daemon\": " + transfer(r.daemon) +
         ", \"tcp\": " + transfer(r.tcp);
    if (r.counted) {
      j += ", \"rail0_sent\": [" + std::to_string(r.rail0[0].sent) + ", " +
           std::to_string(r.rail0[1].sent) + "], \"rail0_slices\": [" +
           std::to_string(r.rail0[0].slices) + ", " + std::to_string(r.rail0[1].slices) +
           "], \"rail0_unused\": " + (r.Rail0Unused() ? "true" : "false") +
           ", \"unused_rails_tx\": " +
           (r.tx_counted ? std::to_string(r.unused_tx) : std::string("null"));
    }
    if (r.daemon_cpu >= 0) j += ", \"daemon_cpu_percent\": " + Fixed(r.daemon_cpu, 1);
    if (r.cut.ran) {
      const CutResult& c = r.cut;
      j += ", \"cut\": {\"ok\": " + std::string(c.ok ? "true" : "false");
      if (c.ok) {
        j += ", \"write_mbps\": " + Fixed(c.write_mbps, 2) +
             ", \"read_mbps\": " + Fixed(c.read_mbps, 2) + ", \"cut_s\": " + Fixed(c.cut_s, 3) +
             ", \"slices_reissued\": " + std::to_string(c.reissued[0] + c.reissued[1]) +
             ", \"rail1_back_s\": " + Fixed(c.back_after_s, 2) + ", \"verified\": true";
      } else {
        j += ", \"error\": " + JsonQuote(c.error);
      }
      j += "}";
    }
    j += std::string("}") + (i + 1 < runs.size() ? "," : "") + "\n";
  }
  j += "  ]\n}\n";
  return harness::WriteFile(path, j);
}

}  // namespace

CLI::App* AddCommand(CLI::App& app, RailsOptions& o) {
  CLI::App* rails = app.add_subcommand(
      "rails",
      "Bulk throughput of one link striped over 1..N rate-limited rails (extra veth pairs) vs one "
      "raw TCP stream per rail, and with rail 1 cut half-way (root: network namespaces and tc)");
  rails->option_defaults()->always_capture_default();
  rails->add_option("--rate", o.rate,
                    "tc tbf rate of each end of every rail (tc syntax, e.g. 400mbit); none: not "
                    "limited");
  rails->add_option("--bytes", o.bytes, "Bytes per transfer (and buffer size), e.g. 512MiB")
      ->transform(CLI::AsSizeValue(true))
      ->check(CLI::Range(uint64_t{1} << 20, uint64_t{16} << 30));
  rails->add_option("--op-bytes", o.op_bytes, "Bytes per piece of a daemon WriteBatch/ReadBatch")
      ->transform(CLI::AsSizeValue(true))
      ->check(CLI::Range(uint64_t{4096}, uint64_t{16} << 30));
  rails->add_option("--max-rails", o.max_rails, "Measure 1, 2, ... this many rails")
      ->check(CLI::Range(1, 8));
  rails->add_option("--repeats", o.repeats, "Timed transfers per direction (after one untimed)")
      ->check(CLI::Range(1, 100));
  rails->add_option("--mechanisms", o.mechanisms, "Which to run: daemon, tcp")
      ->delimiter(',')
      ->check(CLI::IsMember({"daemon", "tcp"}));
  rails
      ->add_option("--cut-rails", o.cut_rails,
                   "Rail counts whose WriteBatch is run once more with rail 1 cut half-way "
                   "(0: none)")
      ->delimiter(',')
      ->check(CLI::Range(0, 8));
  rails
      ->add_option("--restore-after-ms", o.restore_after_ms,
                   "Milliseconds between cutting rail 1 and restoring it")
      ->check(CLI::Range(0, 600000));
  rails->add_option("--json", o.json, "Also write the results as JSON to this file");
  rails->add_option("--daemon", o.daemon,
                    "mcdma-rpcd binary (default: <bench dir>/../daemon/mcdma-rpcd)");
  rails->add_option("--mcdmactl", o.mcdmactl,
                    "mcdmactl binary (default: <bench dir>/../tools/mcdmactl/mcdmactl)");
  rails->add_option("--hosts-script", o.hosts_script, "Network namespace script");
  rails->add_option("--daemon-log-level", o.daemon_log_level, "The daemons' --log-level");
  rails->add_option("--daemon-arg", o.daemon_args, "One more flag for both daemons (repeatable)")
      ->allow_extra_args(false);
  rails->add_option("--log-dir", o.log_dir,
                    "Keep the daemons' logs here, one folder per rail count (default: the run's "
                    "temp dir, removed at the end)");
  rails->add_option("--run-limit", o.run_limit_s, "Seconds one client run may take")
      ->check(CLI::Range(1, 86400));
  rails
      ->add_option("--link-wait", o.link_wait_s,
                   "Seconds the link, then its rails, may take to come up")
      ->check(CLI::Range(1, 3600));
  return rails;
}

int Run(const RailsOptions& o, const std::string& self) {
  Status check = harness::Hosts::Check(o.hosts_script);
  if (check.code() == Code::kUnavailable) {
    printf("mcdma_bench_link rails: not run: %s\n", harness::LastLine(check.message()).c_str());
    return harness::Hosts::kCheckUnavailable;
  }
  if (!check.ok()) {
    fprintf(stderr, "mcdma_bench_link rails: hosts: %s\n", check.message().c_str());
    return 1;
  }
  auto setup = MakeSetup(o);
  if (!setup.ok()) {
    fprintf(stderr, "mcdma_bench_link rails: hosts: %s\n", setup.status().message().c_str());
    return 1;
  }
  const Setup& s = *setup;
  const harness::Hosts& hosts = *s.hosts;

  LinkPlan plan;
  plan.self_exe = self;
  plan.daemon_path = o.daemon.empty() ? harness::NextTo(self, "../daemon/mcdma-rpcd") : o.daemon;
  plan.mcdmactl_path =
      o.mcdmactl.empty() ? harness::NextTo(self, "../tools/mcdmactl/mcdmactl") : o.mcdmactl;
  plan.daemon_log_level = o.daemon_log_level;
  plan.daemon_args = o.daemon_args;
  plan.payloads = {64};  // unused by the bulk roles
  plan.run_limit_ms = o.run_limit_s * 1000;
  plan.link_wait_ms = o.link_wait_s * 1000;
  plan.bulk_bytes = o.bytes;
  plan.op_bytes = o.op_bytes;
  plan.repeats = o.repeats;
  if (access(plan.mcdmactl_path.c_str(), X_OK) != 0 && Has(o.mechanisms, "daemon")) {
    fprintf(stderr, "mcdma_bench_link rails: no mcdmactl at %s: the rails cannot be watched\n",
            plan.mcdmactl_path.c_str());
    return 1;
  }

  std::string setup_text =
      "network namespaces " + hosts[0].netns + " and " + hosts[1].netns +
      "; rail 0 = their own veth (" + hosts[0].address + " - " + hosts[1].address +
      "), not limited; rails 1-" + std::to_string(o.max_rails) + " = one more veth pair each, " +
      (o.rate == "none" ? std::string("not limited")
                        : "tc tbf " + o.rate + " burst 256kb latency 100ms on both ends");
  fprintf(stderr, "mcdma_bench_link rails: %s\n", setup_text.c_str());

  const std::string load_before = LoadAverage();
  RailsBench bench(o, plan, s);
  std::vector<RailsRun> runs;
  for (int n = 1; n <= o.max_rails; ++n) runs.push_back(bench.Run(n));

  printf("link rails: host-a -> host-b over %s; %u CPUs, %s\n", setup_text.c_str(),
         std::thread::hardware_concurrency(), harness::KernelName().c_str());
  printf("load average (1, 5, 15 min) before the run %s, after it %s\n", load_before.c_str(),
         LoadAverage().c_str());
  for (size_t k = 0; k < s.rails.size(); ++k) {
    printf("rail %zu: %s > %s (%s / %s)\n", k + 1, s.rails[k].address[0].c_str(),
           s.rails[k].address[1].c_str(), s.rails[k].interface[0].c_str(),
           s.rails[k].interface[1].c_str());
  }
  printf(
      "\nbulk over N rails (daemons started with rails 1..N as --rail): %s per transfer, median "
      "of %d timed transfers after 1 untimed, every one byte-verified; MB/s = 10^6 B/s; daemon: "
      "WriteBatch/ReadBatch in %s pieces; raw TCP: one stream per rail, equal parts, all at once\n",
      harness::FormatBytes(o.bytes).c_str(), o.repeats, harness::FormatBytes(o.op_bytes).c_str());
  Verdicts verdicts;
  PrintTable(runs, verdicts);
  printf("\n");
  PrintDetails(runs, o.max_rails);
  PrintCuts(runs, o.bytes, o.restore_after_ms);
  bool rail0_unused = true;
  bool counted = false;
  for (const RailsRun& r : runs) {
    if (!r.counted) continue;
    counted = true;
    rail0_unused = rail0_unused && r.Rail0Unused();
  }
  printf("\n");
  if (counted) {
    printf("rail 0 (not limited) carried no one-sided bytes while rails were up: %s\n",
           rail0_unused ? "yes" : "NO");
  }
  bool any_target = false;
  for (const RailsRun& r : runs) any_target = any_target || (r.daemon.ran && TargetFor(r.rails));
  if (any_target) {
    printf("targets: 2 rails >= 1.8x one rail, 3 rails >= 2.6x one rail (write and read): %s\n",
           !verdicts.all_measured ? "NOT ALL MEASURED"
           : verdicts.all_pass    ? "PASS"
                                  : "FAIL");
  }
  fflush(stdout);
  if (!o.json.empty()) {
    Status st = WriteJson(o.json, o, setup_text, runs);
    if (!st.ok()) {
      fprintf(stderr, "mcdma_bench_link rails: %s\n", st.message().c_str());
      return 1;
    }
  }
  return bench.failed ? 1 : 0;
}

}  // namespace rails_mode

CLI::App* AddRailsCommand(CLI::App& app, RailsOptions& options) {
  return rails_mode::AddCommand(app, options);
}

int RunRailsBench(const RailsOptions& options, const std::string& self) {
  return rails_mode::Run(options, self);
}

}  // namespace mcdma::bench
