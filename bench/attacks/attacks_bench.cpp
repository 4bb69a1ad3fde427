// mcdma_bench_attacks: what a hostile local app (or a keyless peer) costs a
// well-behaved one. The benchmark starts mcdma-rpcd as a child process
// (shipped limits; only the socket, host id, fabric key and peer address are
// set), opens two well-behaved sessions (one serves "good.echo", the other
// calls it with 64 B payloads) and runs, alternately, a baseline phase and
// one phase per attack, each of --calls calls. Every attack is a separate
// process (this binary re-executed as `attacker ROLE ...`,
// attack_roles.cpp) that takes what it can, reports the named
// errors it was refused with, and holds on until it is killed at the end
// of its phase; then the good app's next call must succeed.
//
// Printed: per phase p50/p99 in us, their ratio to the preceding baseline,
// the good app's failures (must be 0), the daemon's RSS and open files
// (/proc/PID) before, during and after the attack, and what the attacker
// got, with the daemon's budgets counters (the Admin Status reply, as in
// `mcdmactl status --json`). Timings are never judged; the exit code is 1
// only when the good app failed a call.
//
// Usage (the acceptance conditions: ulimit -n 256, a 64 MiB /dev/shm):
//   sudo bench/attacks/run_attacks.sh [build dir] [options]
//   build/bench/mcdma_bench_attacks [--calls 2000] [--attacks fds,memory,...]
//                                   [--daemon build/daemon/mcdma-rpcd]
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <charconv>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "attack_roles.hpp"
#include "harness/child.hpp"
#include "harness/daemon_echo.hpp"
#include "harness/daemons.hpp"
#include "harness/endpoint.hpp"
#include "harness/files.hpp"
#include "harness/hosts.hpp"
#include "harness/latency.hpp"
#include "harness/pair_runner.hpp"
#include "harness/report.hpp"
#include "harness/round_trips.hpp"
#include "mcdma/client.hpp"
#include "mcdma/v1/admin.grpc.pb.h"

namespace mcdma::bench {
namespace {

using harness::Clock;
using harness::Fixed;
using harness::FormatBytes;
using harness::Summary;

using std::chrono::milliseconds;
constexpr char kEcho[] = "good.echo";

struct Probe {  // the daemon from outside: /proc and its budgets
  double rss_mib = -1;
  int fds = -1;
  std::optional<mcdma::v1::StatusReply> status;
};

Probe Look(pid_t pid, mcdma::v1::Admin::Stub& admin) {
  Probe p;
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmRSS:", 0) == 0) p.rss_mib = std::stod(line.substr(6)) / 1024.0;
  }
  std::error_code ec;
  int n = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++n;
  }
  if (!ec) p.fds = n;
  mcdma::v1::StatusReply reply;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(3));
  if (admin.Status(&ctx, mcdma::v1::StatusRequest(), &reply).ok()) p.status = reply;
  return p;
}

struct Phase {
  std::string name;
  Summary summary;
  int failures = 0;
  std::string first_failure;
};

Phase RunPhase(const std::string& name, mcdma::Client& caller, int calls) {
  Phase ph{name, {}, 0, {}};
  std::vector<std::byte> request(64);
  harness::FillPattern(request);
  std::vector<uint64_t> nanos;
  for (int i = 0; i < calls; ++i) {
    harness::StampIteration(request, static_cast<uint64_t>(i));
    auto t0 = Clock::now();
    auto reply = caller.Call(kEcho, request, milliseconds(5000));
    auto t1 = Clock::now();
    bool same = reply.ok() && reply->size() == request.size() &&
                std::memcmp(reply->data(), request.data(), request.size()) == 0;
    if (!same) {
      if (ph.failures++ == 0)
        ph.first_failure = reply.ok() ? "reply differs" : reply.status().ToString();
      continue;
    }
    nanos.push_back(static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count()));
  }
  ph.summary = harness::Summarize(std::move(nanos));
  return ph;
}

// The budgets counters an attack moves (after minus before), and what it
// holds while it runs.
std::string Budgets(const Probe& before, const Probe& during, const Probe& after) {
  if (!before.status || !after.status) return "budgets: status unavailable";
  const auto& b = before.status->budgets();
  const auto& a = after.status->budgets();
  std::string out;
  for (const auto& la : a.listeners()) {
    for (const auto& lb : b.listeners()) {
      if (lb.name() != la.name()) continue;
      out += la.name() + " refused " +
             std::to_string(la.refused_limit() + la.refused_per_source() - lb.refused_limit() -
                            lb.refused_per_source()) +
             " (per source " + std::to_string(la.refused_per_source() - lb.refused_per_source()) +
             ", cap " + std::to_string(la.max_per_source()) + "), shed " +
             std::to_string(la.shed_out_of_files() - lb.shed_out_of_files()) + "; ";
    }
  }
  out += "auth refused " + std::to_string(a.auth_refused() - b.auth_refused()) + ", timed out " +
         std::to_string(a.auth_timed_out() - b.auth_timed_out());
  if (during.status) {
    const auto& d = during.status->budgets();
    out += "; during: backlog " + FormatBytes(d.backlog_bytes()) + ", shm free " +
           std::to_string(d.shm_free() >> 20) + " of " + std::to_string(d.shm_capacity() >> 20) +
           " MiB";
    for (const auto& u : d.users()) {
      out += ", uid " + std::to_string(u.uid()) + ": " + std::to_string(u.sessions()) +
             " sessions, " + std::to_string(u.buffers()) + " buffers, " +
             std::to_string(u.bytes() >> 20) + " MiB";
    }
  } else {
    out += "; during: status refused (the attacker holds this uid's connections)";
  }
  return out;
}

struct AttackResult {
  std::string key;
  std::string got;
  std::string budgets;
  Probe before, during, after;
  bool next_call_ok = false;
  std::string next_call;
};

mcdma::Result<std::unique_ptr<mcdma::Client>> Connect(const std::string& socket, const char* name) {
  mcdma::ClientOptions o;
  o.socket = socket;
  o.app_name = name;
  o.arena_bytes = 1 << 20;  // 64 B calls; leaves /dev/shm to the attackers
  return harness::ConnectWithRetry(o);
}

// argv run as uid:gid `id` (setpriv, util-linux), no other groups but `id`.
std::vector<std::string> AsUser(int id, std::vector<std::string> argv) {
  const std::string n = std::to_string(id);
  std::vector<std::string> out = {"/usr/bin/setpriv", "--reuid=" + n, "--regid=" + n,
                                  "--groups=" + n, "--"};
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

std::string Ratio(double v, double base) { return base > 0 ? Fixed(v / base, 2) : "-"; }
std::string Three(double b, double d, double a, int decimals) {
  return Fixed(b, decimals) + "/" + Fixed(d, decimals) + "/" + Fixed(a, decimals);
}

int Main(int argc, char** argv) {
  if (argc == 7 && std::string(argv[1]) == "attacker") {
    int a = 0;
    int b = 0;
    const char* ea = argv[5] + strlen(argv[5]);
    const char* eb = argv[6] + strlen(argv[6]);
    if (std::from_chars(argv[5], ea, a).ptr != ea || std::from_chars(argv[6], eb, b).ptr != eb) {
      fprintf(stderr, "mcdma_bench_attacks attacker: '%s' and '%s' must be integers\n", argv[5],
              argv[6]);
      return 2;
    }
    return attacks::RunAttacker(argv[2], argv[3], argv[4], a, b);
  }
  CLI::App app{
      "mcdma_bench_attacks: a well-behaved app's calls while hostile apps attack the daemon"};
  int calls = 2000;
  std::vector<std::string> which;
  std::string daemon_path;
  bool large_shm = false;
  // As root the attackers run as another user (setpriv), so per-user
  // budgets stand between them and the well-behaved apps (which run as the
  // benchmark's user), and the keyless peer can come from another host.
  int attacker_uid = geteuid() == 0 ? 64742 : -1;
  std::string daemon_netns;
  std::string daemon_ip = "127.0.0.1";
  std::string peer_netns;
  app.add_option("--calls", calls, "calls per phase")->check(CLI::Range(10, 10000000));
  app.add_option(
      "--attacker-uid", attacker_uid,
      "uid (and gid) of the attackers; -1: the benchmark's own (default as root: 64742)");
  app.add_option("--daemon-netns", daemon_netns, "network namespace of the daemon (ip netns)");
  app.add_option("--daemon-ip", daemon_ip, "address the daemon's peer port listens on");
  app.add_option("--peer-netns", peer_netns, "network namespace of the keyless peer attacker");
  app.add_option("--attacks", which, "attacks to run (default all)")->delimiter(',');
  app.add_option("--daemon", daemon_path, "mcdma-rpcd (default <bench dir>/../daemon/mcdma-rpcd)");
  app.add_flag("--large-shm", large_shm, "run the shm attack on a /dev/shm over 1 GiB");
  CLI11_PARSE(app, argc, argv);
  auto self = harness::SelfExePath();
  if (!self.ok()) return fprintf(stderr, "%s\n", self.status().ToString().c_str()), 1;
  if (daemon_path.empty()) {
    daemon_path = std::filesystem::path(*self).parent_path().string() + "/../daemon/mcdma-rpcd";
  }
  if (which.empty()) {
    for (const auto& a : attacks::Attacks()) which.push_back(a.key);
  }
  struct statvfs shm {};
  uint64_t shm_bytes = statvfs("/dev/shm", &shm) == 0 ? uint64_t{shm.f_blocks} * shm.f_frsize : 0;
  rlimit nofile{};
  getrlimit(RLIMIT_NOFILE, &nofile);
  harness::TempDir dir("mcdma-attacks");
  if (!dir.ok()) return fprintf(stderr, "%s\n", dir.error().c_str()), 1;
  // The socket's directory: the daemon gives the socket its group (0660),
  // and the attackers are members, like apps of the mcdma group.
  const bool other_user = attacker_uid >= 0 && static_cast<uid_t>(attacker_uid) != geteuid();
  const std::string run_dir = dir.Join("run");
  if (mkdir(run_dir.c_str(), 0750) != 0 ||
      (other_user &&
       (chmod(dir.path().c_str(), 0711) != 0 ||
        chown(run_dir.c_str(), static_cast<uid_t>(-1), static_cast<gid_t>(attacker_uid)) != 0))) {
    return fprintf(stderr, "socket directory %s: %s\n", run_dir.c_str(), strerror(errno)), 1;
  }
  const std::string socket = run_dir + "/rpcd.sock";
  const std::string key = dir.Join("fabric.key");
  if (auto st = harness::WriteFabricKey(key); !st.ok())
    return fprintf(stderr, "%s\n", st.ToString().c_str()), 1;
  std::vector<uint16_t> free_ports = harness::FreePorts(1);
  const int port = free_ports.empty() ? -1 : free_ports[0];
  std::vector<std::string> daemon_argv = {
      daemon_path,   "--socket",     socket,
      "--host-id",   "attack-bench", "--fabric-key",
      key,           "--listen",     daemon_ip + ":" + std::to_string(port),
      "--log-level", "warn"};
  auto daemon = harness::SpawnDaemon(harness::InNamespace(daemon_netns, daemon_argv), socket,
                                     dir.Join("daemon.log"), true, milliseconds(10000));
  if (!daemon.ok()) return fprintf(stderr, "%s\n", daemon.status().ToString().c_str()), 1;
  auto server = Connect(socket, "good-server");
  auto caller = server.ok() ? Connect(socket, "good-caller") : server.status();
  if (!caller.ok()) {
    fprintf(stderr, "no session with the daemon: %s (log: %s)\n",
            caller.status().ToString().c_str(), dir.Join("daemon.log").c_str());
    return 1;
  }
  auto served = (*server)->Serve(kEcho, [](mcdma::ServerCall& c) { (void)c.Reply(c.payload()); });
  if (!served.ok()) return fprintf(stderr, "Serve: %s\n", served.status().ToString().c_str()), 1;
  auto admin = mcdma::v1::Admin::NewStub(
      grpc::CreateChannel("unix:" + socket, grpc::InsecureChannelCredentials()));
  mcdma::Client& good = **caller;
  (void)RunPhase("warm-up", good, calls / 4);

  printf("mcdma_bench_attacks: %d calls of 64 B per phase; daemon %s (pid %d)\n", calls,
         daemon_path.c_str(), (*daemon)->pid());
  printf("conditions: ulimit -n %llu, /dev/shm %llu MiB, %u CPUs, %s\n",
         static_cast<unsigned long long>(nofile.rlim_cur),
         static_cast<unsigned long long>(shm_bytes >> 20), std::thread::hardware_concurrency(),
         harness::KernelName().c_str());
  const std::string peer_from =
      peer_netns.empty() ? std::string("this host") : "network namespace " + peer_netns;
  printf("attackers: uid %d (the good apps: uid %d); keyless peer from %s to %s:%d\n",
         other_user ? attacker_uid : static_cast<int>(geteuid()), static_cast<int>(geteuid()),
         peer_from.c_str(), daemon_ip.c_str(), port);
  std::vector<Phase> phases;
  std::vector<AttackResult> results;
  int failures = 0;
  phases.push_back(RunPhase("baseline", good, calls));
  for (const std::string& key_name : which) {
    AttackResult r;
    r.key = key_name;
    r.before = Look((*daemon)->pid(), *admin);
    if (key_name == "shm" && shm_bytes > (uint64_t{1} << 30) && !large_shm) {
      r.got = "skipped: /dev/shm is over 1 GiB (run_attacks.sh mounts 64 MiB; --large-shm)";
      results.push_back(r);
      continue;
    }
    auto ready = harness::MakePipe();
    if (!ready.ok()) return fprintf(stderr, "%s\n", ready.status().ToString().c_str()), 1;
    std::vector<std::string> attacker_argv = {*self,
                                              "attacker",
                                              key_name,
                                              socket,
                                              daemon_ip,
                                              std::to_string(port),
                                              std::to_string(ready->write.get())};
    if (other_user) attacker_argv = AsUser(attacker_uid, attacker_argv);
    if (key_name == "peer") attacker_argv = harness::InNamespace(peer_netns, attacker_argv);
    harness::SpawnOptions attacker_spawn =
        harness::LoggedSpawn("attacker " + key_name, dir.Join("attacker-" + key_name + ".log"));
    attacker_spawn.keep_fds = {ready->write.get()};
    auto attacker = harness::Child::Spawn(attacker_argv, attacker_spawn);
    if (!attacker.ok()) return fprintf(stderr, "%s\n", attacker.status().ToString().c_str()), 1;
    ready->write.Reset();
    auto got = harness::WaitReadyMessage(ready->read.get(), milliseconds(120000));
    r.got = got.ok() ? *got : "no report: " + got.status().ToString();
    while (!r.got.empty() && r.got.back() == '\n') r.got.pop_back();
    phases.push_back(RunPhase(key_name, good, calls));
    r.during = Look((*daemon)->pid(), *admin);
    (*attacker)->Kill();
    std::this_thread::sleep_for(milliseconds(1500));  // reclaim; the listener's sweep
    auto next = good.Call(kEcho, std::string_view("after the attack"), milliseconds(5000));
    r.next_call_ok = next.ok() && next->view() == "after the attack";
    r.next_call = r.next_call_ok ? "ok" : (next.ok() ? "reply differs" : next.status().ToString());
    r.after = Look((*daemon)->pid(), *admin);
    r.budgets = Budgets(r.before, r.during, r.after);
    results.push_back(r);
    phases.push_back(RunPhase("baseline", good, calls));
  }

  printf("\n%-10s %9s %9s %7s %7s %6s %20s %14s %s\n", "phase", "p50 us", "p99 us", "p50 x",
         "p99 x", "fail", "daemon RSS MiB b/d/a", "fds b/d/a", "next call");
  const Phase* base = nullptr;
  size_t next_result = 0;
  for (const Phase& ph : phases) {
    failures += ph.failures;
    std::string extra = ph.failures ? "  first failure: " + ph.first_failure : "";
    if (ph.name == "baseline") {
      base = &ph;
      printf("%-10s %9s %9s %7s %7s %6d %20s %14s%s\n", ph.name.c_str(),
             Fixed(ph.summary.p50_us, 1).c_str(), Fixed(ph.summary.p99_us, 1).c_str(), "", "",
             ph.failures, "", "", extra.c_str());
      continue;
    }
    while (next_result < results.size() && results[next_result].key != ph.name) ++next_result;
    const AttackResult& r = results[next_result];
    if (!r.next_call_ok) ++failures;
    printf("%-10s %9s %9s %7s %7s %6d %20s %14s %s%s\n", ph.name.c_str(),
           Fixed(ph.summary.p50_us, 1).c_str(), Fixed(ph.summary.p99_us, 1).c_str(),
           Ratio(ph.summary.p50_us, base->summary.p50_us).c_str(),
           Ratio(ph.summary.p99_us, base->summary.p99_us).c_str(), ph.failures,
           Three(r.before.rss_mib, r.during.rss_mib, r.after.rss_mib, 0).c_str(),
           (std::to_string(r.before.fds) + "/" + std::to_string(r.during.fds) + "/" +
            std::to_string(r.after.fds))
               .c_str(),
           r.next_call.c_str(), extra.c_str());
  }
  printf("(x: ratio to the baseline just before; b/d/a: before, during, after the attack)\n\n");
  printf("What each attacker got:\n");
  for (const AttackResult& r : results) {
    std::string what;
    for (const auto& a : attacks::Attacks()) {
      if (r.key == a.key) what = a.description;
    }
    printf("- %s: %s\n    got: %s\n    %s\n", r.key.c_str(), what.c_str(), r.got.c_str(),
           r.budgets.c_str());
  }
  printf("\ngood app failures: %d (must be 0)\n", failures);
  (*daemon)->Stop(SIGTERM, milliseconds(5000));
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace mcdma::bench

int main(int argc, char** argv) {
  return mcdma::harness::GuardedMain("mcdma_bench_attacks", mcdma::bench::Main, argc, argv);
}
