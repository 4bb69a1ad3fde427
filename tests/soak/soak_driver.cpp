// The soak's driver (`mcdma_soak run`): two hosts in two network namespaces
// joined by a veth (tests/netns/hosts.sh), a daemon in each linked over
// tcp, and 8 apps (soak_app.cpp), 4 per host, each calling, notifying,
// writing and reading the other 7. For the given minutes it kills a random
// app now and then (SIGKILL; a fresh one takes its place) and cuts the wire
// (the veth down, then up). A quiet phase follows, then everything stops
// and the checks run:
//   - every failed operation ended with a code expected for a kill or a cut;
//   - no notification acknowledged to its sender is missing at its receiver,
//     none arrived twice, no call was answered twice, no byte was wrong
//     (between the apps alive at the end: a killed app's ledger dies with it);
//   - nothing stuck: no operation outlived its deadline by 3 s, every app
//     stops when told, and in the quiet phase every app passes operations
//     of every kind again;
//   - neither daemon crashed, both exit 0 on SIGTERM, and no /dev/shm entry
//     of theirs is left.
// It prints the operations by kind, the failures by code, lost and
// duplicated counts and each daemon's RSS and open descriptors at the start
// and the end. Threading: one thread.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "harness/child.hpp"
#include "harness/daemons.hpp"
#include "harness/files.hpp"
#include "harness/hosts.hpp"
#include "soak.hpp"
#include "soak_wire.hpp"
#include "socket_path.hpp"

namespace mcdma::soak {
namespace {

using harness::Child;
using harness::CommandResult;
using harness::Millis;
using SteadyClock = std::chrono::steady_clock;
using Host = harness::DaemonHost;

constexpr int kApps = 8;
constexpr const char* kKinds[] = {"call", "notify", "read", "write"};
// What a failed operation may end with while apps die and the wire is cut.
const std::set<std::string> kOpCodes = {"LINK_DOWN", "PEER_GONE", "NOT_FOUND", "REVOKED"};
// Look-ups and resolves: the service or export is gone, or the link is.
const std::set<std::string> kControlCodes = {"NOT_FOUND", "LINK_DOWN"};

bool IsControl(const std::string& kind) { return kind == "lookup" || kind == "resolve"; }

double Seconds(SteadyClock::duration d) { return std::chrono::duration<double>(d).count(); }

// A daemon's resident memory (kB) and open descriptors, from /proc.
struct Footprint {
  uint64_t rss_kb = 0;
  uint64_t fds = 0;
};

Footprint FootprintOf(pid_t pid) {
  Footprint f;
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) f.rss_kb = std::stoull(line.substr(6));
  }
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++f.fds;
  }
  return f;
}

// One run of an app (an incarnation): its process and what it reported.
struct Run {
  int app = 0;
  uint64_t inc = 0;
  std::unique_ptr<Child> child;
  std::map<std::string, uint64_t> passed;  // by kind: its last S line, then FINAL
  bool killed = false;
  bool reported = false;
  std::map<std::string, uint64_t> final_fields;  // FINAL's key=value pairs
  std::vector<std::string> sent, recv;           // SENT and RECV lines
  size_t processed = 0;                          // lines of child already read
};

std::map<std::string, uint64_t> KeyValues(const std::string& line) {
  std::map<std::string, uint64_t> out;
  std::stringstream ss(line);
  std::string word;
  while (ss >> word) {
    auto eq = word.find('=');
    if (eq == std::string::npos) continue;
    try {
      out[word.substr(0, eq)] = std::stoull(word.substr(eq + 1));
    } catch (...) {
    }
  }
  return out;
}

class Soak {
 public:
  Soak(double minutes, uint64_t seed, uint64_t drop_every)
      : minutes_(minutes), seed_(seed), drop_every_(drop_every), rng_(seed) {}
  int Main();

 private:
  bool SetUp();
  bool StartDaemon(Host& h);
  bool LinksUp(Millis timeout);
  bool StartApp(int app);
  void KillApp(int app);
  void ReadLines(Run& r);
  void Pump();
  void Chaos(SteadyClock::time_point until);
  bool StopAndReport();
  void TearDown();
  int Summarize();
  // hosts.sh cut / restore.
  CommandResult HostsSh(const std::string& cmd) { return hosts_->Script(cmd); }
  Host& HostOf(int app) { return app < kApps / 2 ? a_ : b_; }
  void Problem(const std::string& what) {
    problems_.push_back(what);
    std::cerr << "soak: PROBLEM: " << what << "\n";
  }
  void Event(const std::string& what) {
    std::cerr << "soak: +" << static_cast<int>(Seconds(SteadyClock::now() - start_)) << "s " << what
              << "\n";
  }

  const double minutes_;
  const uint64_t seed_;
  const uint64_t drop_every_;  // self-test: the apps forget every Nth notification
  std::mt19937_64 rng_;
  harness::TempDir dir_;
  std::string self_;                       // this binary, run again as each app
  std::unique_ptr<harness::Hosts> hosts_;  // the two namespaces
  bool cut_ = false;
  Host a_, b_;
  SteadyClock::time_point start_;
  std::vector<std::unique_ptr<Run>> runs_;  // every incarnation, in start order
  Run* current_[kApps] = {};
  std::map<std::string, std::map<std::string, uint64_t>> failures_;  // kind -> code -> n
  std::vector<std::string> bad_;                                     // BAD and OVERDUE lines
  std::vector<std::string> problems_;
  int kills_ = 0, cuts_ = 0;
  Footprint start_fp_[2], end_fp_[2];
  bool daemons_clean_exit_ = true;
  size_t shm_left_ = 0;
};

bool Soak::SetUp() {
  if (!dir_.ok()) {
    Problem(dir_.error());
    return false;
  }
  const std::string key = dir_.path() + "/fabric.key";
  if (Status st = harness::WriteFabricKey(key); !st.ok()) {
    Problem("fabric key: " + st.message());
    return false;
  }
  auto hosts =
      harness::Hosts::MakeNamespaces(MCDMA_HOSTS_SH, "mcsk" + std::to_string(getpid() % 100000), 2);
  if (!hosts.ok()) {
    Problem(hosts.status().message());
    return false;
  }
  hosts_ = std::move(hosts).value();
  Host* both[2] = {&a_, &b_};
  for (size_t i = 0; i < 2; ++i) {
    Host* h = both[i];
    static_cast<harness::Host&>(*h) = (*hosts_)[i];
    h->socket = dir_.path() + "/" + h->id + ".sock";
    h->log = dir_.path() + "/daemon-" + h->id + ".log";
    h->key = key;
    h->peer_port = harness::kPeerPort;
    h->data_port = harness::kDataPort;
    h->extra = {"--heartbeat-ms", "200", "--link-timeout-ms", "1500", "--reconnect-max-ms", "1000"};
  }
  a_.peers = {"host-b=" + b_.listen() + ",tcp"};
  if (!StartDaemon(b_) || !StartDaemon(a_)) return false;
  if (!LinksUp(Millis(20000))) {
    Problem("the link between host-a and host-b did not come up within 20 s");
    return false;
  }
  return true;
}

bool Soak::StartDaemon(Host& h) {
  Status st = harness::StartDaemon(MCDMA_RPCD_PATH, h, Millis(20000));
  if (!st.ok()) Problem(st.message());
  return st.ok();
}

bool Soak::LinksUp(Millis timeout) {
  auto deadline = SteadyClock::now() + timeout;
  while (SteadyClock::now() < deadline) {
    bool both = true;
    for (Host* h : {&a_, &b_}) {
      auto links = harness::ReadLinks(MCDMA_CTL_PATH, *h);
      bool up = false;
      if (links.ok()) {
        for (const auto& l : links->links()) up = up || l.state() == "up";
      }
      both = both && up;
    }
    if (both) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

bool Soak::StartApp(int app) {
  Host& h = HostOf(app);
  std::string hosts;
  for (int j = 0; j < kApps; ++j) hosts += (j ? "," : "") + HostOf(j).id;
  std::vector<std::string> argv = {self_,      "app",
                                   "--socket", h.socket,
                                   "--index",  std::to_string(app),
                                   "--hosts",  hosts,
                                   "--seed",   std::to_string(seed_ * 100 + app)};
  if (drop_every_ > 0) {
    argv.push_back("--drop-every");
    argv.push_back(std::to_string(drop_every_));
  }
  harness::SpawnOptions o;
  o.stderr_path = dir_.path() + "/app-" + std::to_string(app) + ".log";
  auto run = std::make_unique<Run>();
  run->app = app;
  auto child = Child::Spawn(hosts_->On(h, argv), o);
  if (!child.ok()) {
    Problem("cannot start app " + std::to_string(app) + ": " + child.status().message());
    return false;
  }
  run->child = std::move(child).value();
  auto ready = run->child->WaitForPrefix("READY", Millis(20000));
  if (!ready) {
    Problem("app " + std::to_string(app) + " did not get ready:\n" + run->child->Describe());
    return false;
  }
  run->inc = KeyValues(*ready)["inc"];
  current_[app] = run.get();
  runs_.push_back(std::move(run));
  return true;
}

void Soak::KillApp(int app) {
  Run* r = current_[app];
  if (r == nullptr) return;
  r->child->Kill();
  r->killed = true;
  ReadLines(*r);  // what it printed before it died
  current_[app] = nullptr;
  ++kills_;
}

// Everything a run printed since the last look.
void Soak::ReadLines(Run& r) {
  r.child->Drain();
  const auto& lines = r.child->lines();
  for (size_t i = r.processed; i < lines.size(); ++i) {
    const std::string& l = lines[i];
    if (l.rfind("F ", 0) == 0) {
      std::istringstream ss(l.substr(2));
      std::string kind, code;
      ss >> kind >> code;
      ++failures_[kind][code];
    } else if (l.rfind("S ", 0) == 0) {
      for (const auto& [k, v] : KeyValues(l)) r.passed[k] = v;
    } else if (l.rfind("BAD", 0) == 0 || l.rfind("OVERDUE", 0) == 0) {
      bad_.push_back("app " + std::to_string(r.app) + ": " + l);
      std::cerr << "soak: app " << r.app << ": " << l << "\n";
    } else if (l.rfind("SENT ", 0) == 0) {
      r.sent.push_back(l);
    } else if (l.rfind("RECV ", 0) == 0) {
      r.recv.push_back(l);
    } else if (l.rfind("FINAL ", 0) == 0) {
      r.final_fields = KeyValues(l);
      for (const char* k : kKinds) r.passed[k] = r.final_fields[k];
    } else if (l == "END") {
      r.reported = true;
    }
  }
  r.processed = lines.size();
}

void Soak::Pump() {
  for (Run* r : current_) {
    if (r != nullptr) ReadLines(*r);
  }
  for (Host* h : {&a_, &b_}) {
    if (h->daemon && !h->daemon->Alive()) {
      Problem(h->id +
              "'s daemon died: " + harness::DescribeStatus(h->daemon->exit_status().value_or(0)));
      h->daemon.reset();
    }
  }
}

void Soak::Chaos(SteadyClock::time_point until) {
  auto uniform = [&](double lo, double hi) {
    return lo + (hi - lo) * std::uniform_real_distribution<double>(0, 1)(rng_);
  };
  auto at = [&](double s) {
    return SteadyClock::now() +
           std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(s));
  };
  auto next_event = at(uniform(2, 5));
  SteadyClock::time_point restore_at{};  // while cut_
  std::map<int, SteadyClock::time_point> restart_at;
  while (SteadyClock::now() < until && problems_.empty()) {
    Pump();
    auto now = SteadyClock::now();
    for (auto it = restart_at.begin(); it != restart_at.end();) {
      if (now < it->second) {
        ++it;
        continue;
      }
      Event("app " + std::to_string(it->first) + " started again");
      if (!StartApp(it->first)) return;
      it = restart_at.erase(it);
    }
    if (cut_ && now >= restore_at) {
      CommandResult r = HostsSh("restore");
      if (r.exit_code() != 0) Problem("hosts.sh restore: " + r.Describe());
      Event("wire restored");
      cut_ = false;
    }
    if (now >= next_event) {
      if (rng_() % 10 < 6 || cut_) {
        int app = static_cast<int>(rng_() % kApps);
        if (current_[app] != nullptr) {
          Event("kill -9 app " + std::to_string(app) + " on " + HostOf(app).id);
          KillApp(app);
          restart_at[app] = at(uniform(0.1, 1.0));
        }
      } else {
        CommandResult r = HostsSh("cut");
        if (r.exit_code() != 0) Problem("hosts.sh cut: " + r.Describe());
        cut_ = true;
        ++cuts_;
        double for_s = uniform(0.5, 3.0);
        Event("wire cut for " + std::to_string(for_s).substr(0, 4) + " s");
        restore_at = at(for_s);
      }
      next_event = at(uniform(2, 5));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  // Whatever is pending happens now.
  if (cut_) {
    (void)HostsSh("restore");
    cut_ = false;
    Event("wire restored");
  }
  for (const auto& [app, when] : restart_at) {
    Event("app " + std::to_string(app) + " started again");
    if (!StartApp(app)) return;
  }
}

// Stops the traffic of every app, then collects its ledgers.
bool Soak::StopAndReport() {
  for (Run* r : current_) {
    if (r == nullptr || !r->child->WriteStdin("stop\n")) {
      Problem("an app is missing at the end");
      return false;
    }
  }
  for (Run* r : current_) {
    if (!r->child->WaitForPrefix("STOPPED", Millis(20000))) {
      Problem("app " + std::to_string(r->app) + " did not stop its traffic (stuck?)");
      return false;
    }
  }
  // Notifications acknowledged just before the stop reach their handlers.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  for (Run* r : current_) {
    if (!r->child->WriteStdin("report\n") || !r->child->WaitForPrefix("END", Millis(20000))) {
      Problem("app " + std::to_string(r->app) + " did not report");
      return false;
    }
  }
  for (Run* r : current_) ReadLines(*r);
  return true;
}

void Soak::TearDown() {
  for (Run* r : current_) {
    if (r == nullptr) continue;
    r->child->CloseStdin();
    auto st = r->child->WaitExit(Millis(15000));
    if (!harness::ExitedWith(st, 0)) {
      Problem("app " + std::to_string(r->app) + " ended with " +
              (st ? harness::DescribeStatus(*st) : std::string("nothing (still running)")));
      r->child->Kill();
    }
  }
  for (Host* h : {&a_, &b_}) {
    if (!h->daemon) {
      daemons_clean_exit_ = false;
      continue;
    }
    h->daemon->Signal(SIGTERM);
    auto st = h->daemon->WaitExit(Millis(15000));
    if (!harness::ExitedWith(st, 0)) {
      daemons_clean_exit_ = false;
      Problem(h->id + "'s daemon ended with " +
              (st ? harness::DescribeStatus(*st) : std::string("nothing within 15 s of SIGTERM")));
      h->daemon->Kill();
    }
  }
  // No entry of either daemon's is left (their names carry the socket's
  // tag: daemon/src/socket_path.hpp).
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm", ec)) {
    std::string name = e.path().filename().string();
    for (Host* h : {&a_, &b_}) {
      if (name.size() > 16 && name.compare(8, 8, daemon::SegmentTag(h->socket)) == 0) {
        ++shm_left_;
        Problem("/dev/shm/" + name + " is left");
      }
    }
  }
  if (hosts_) {
    CommandResult down = hosts_->Down();
    if (down.exit_code() != 0) Problem("hosts.sh down: " + down.Describe());
  }
}

int Soak::Summarize() {
  // Operations by kind, over every run (a killed one: as of its last S line).
  std::map<std::string, uint64_t> ops;
  for (const auto& r : runs_) {
    for (const char* k : kKinds) ops[k] += r->passed[k];
  }
  // Lost and duplicated notifications, between the runs alive at the end.
  std::map<uint64_t, Run*> finals;
  for (Run* r : current_) {
    if (r != nullptr && r->reported) finals[r->inc] = r;
  }
  uint64_t checked = 0, lost = 0, ghosts = 0, unchecked = 0, pairs = 0;
  for (const auto& [inc, sender_run] : finals) {
    for (const std::string& line : sender_run->sent) {
      std::istringstream ss(line.substr(5));
      uint64_t target = 0, sender = 0, n = 0;
      std::string failed_text;
      ss >> target >> sender >> n >> failed_text;
      auto t = finals.find(target);
      if (t == finals.end()) {
        unchecked += n;  // its receiver was killed: its ledger went with it
        continue;
      }
      std::set<uint64_t> failed;
      for (const auto& f : SplitList(failed_text == "-" ? "" : failed_text)) {
        failed.insert(std::stoull(f));
      }
      SeqRanges got;
      for (const std::string& rl : t->second->recv) {
        std::istringstream rs(rl.substr(5));
        uint64_t from = 0;
        std::string ranges;
        rs >> from >> ranges;
        if (from == sender) got = SeqRanges::Parse(ranges);
      }
      ++pairs;
      for (uint64_t seq = 0; seq < n; ++seq) {
        if (failed.count(seq) != 0) continue;
        ++checked;
        if (!got.Contains(seq)) {
          ++lost;
          if (lost <= 10) {
            std::cerr << "soak: lost: notification " << seq << " from " << sender << " to "
                      << target << " was acknowledged but never arrived\n";
          }
        }
      }
      if (!got.empty() && got.Max() >= n) ++ghosts;
    }
  }
  uint64_t dups = ghosts, wrong = 0, misrouted = 0, overdue = 0, other_bad = 0;
  for (const std::string& b : bad_) {
    if (b.find("duplicate") != std::string::npos) {
      ++dups;
    } else if (b.find("misrouted") != std::string::npos) {
      ++misrouted;
    } else if (b.find("OVERDUE") != std::string::npos) {
      ++overdue;
    } else if (b.find("BAD") != std::string::npos) {
      ++wrong;
    } else {
      ++other_bad;
    }
  }
  bool quiet_ok = !finals.empty() && finals.size() == kApps;
  std::string quiet_missing;
  for (const auto& [inc, r] : finals) {
    for (const char* k : kKinds) {
      if (r->final_fields["q" + std::string(k)] == 0) {
        quiet_ok = false;
        quiet_missing += " app " + std::to_string(r->app) + ":" + k;
      }
    }
  }

  uint64_t unexpected = 0;
  std::ostringstream out;
  out << "== soak: " << minutes_ << " min, seed " << seed_ << ", " << kApps
      << " apps on 2 hosts (network namespaces, tcp link): " << kills_ << " app kills, " << cuts_
      << " wire cuts\n";
  uint64_t total = 0;
  out << "operations passed:";
  for (const char* k : kKinds) {
    out << " " << k << " " << ops[k];
    total += ops[k];
  }
  out << " (total " << total << ")\n";
  out << "failures by code:";
  if (failures_.empty()) out << " none";
  out << "\n";
  for (const auto& [kind, codes] : failures_) {
    for (const auto& [code, n] : codes) {
      bool expected = (IsControl(kind) ? kControlCodes : kOpCodes).count(code) != 0;
      if (!expected) unexpected += n;
      out << "  " << kind << " " << code << " " << n << (expected ? "" : "  UNEXPECTED") << "\n";
    }
  }
  out << "unexpected codes: " << unexpected << "\n";
  out << "lost " << lost << ", duplicated " << dups << " (" << checked
      << " acknowledged notifications checked over " << pairs << " sender/receiver pairs; "
      << unchecked << " sent to receivers killed later, not checkable)\n";
  out << "wrong bytes " << wrong << ", misrouted " << misrouted << ", stuck (past deadline + 3 s) "
      << overdue << "\n";
  out << "quiet phase: every app passed every kind again: " << (quiet_ok ? "yes" : "no")
      << quiet_missing << "\n";
  const Host* hosts[2] = {&a_, &b_};
  for (int i = 0; i < 2; ++i) {
    out << "daemon " << hosts[i]->id << ": RSS " << start_fp_[i].rss_kb << " kB -> "
        << end_fp_[i].rss_kb << " kB, open fds " << start_fp_[i].fds << " -> " << end_fp_[i].fds
        << "\n";
  }
  out << "daemons alive to the end and exited 0 on SIGTERM: "
      << (daemons_clean_exit_ ? "yes" : "no") << "; /dev/shm entries left: " << shm_left_ << "\n";
  bool pass = problems_.empty() && unexpected == 0 && lost == 0 && dups == 0 && wrong == 0 &&
              misrouted == 0 && overdue == 0 && other_bad == 0 && quiet_ok && daemons_clean_exit_ &&
              shm_left_ == 0 && total > 0;
  for (const auto& p : problems_) out << "problem: " << p << "\n";
  out << "result: " << (pass ? "PASS" : "FAIL") << "\n";
  std::cout << out.str();
  std::cout.flush();
  if (!pass) {
    std::cerr << "soak: the daemons' logs (tails):\n";
    for (const Host* h : hosts) {
      std::cerr << "==== " << h->id << " ====\n";
      std::string log = harness::ReadFile(h->log);
      std::cerr << log.substr(log.size() > 6000 ? log.size() - 6000 : 0) << "\n";
    }
  }
  return pass ? 0 : 1;
}

int Soak::Main() {
  Status check = harness::Hosts::Check(MCDMA_HOSTS_SH);
  if (check.code() == Code::kUnavailable) {
    std::cout << "soak: skipped: " << check.message()
              << "(two hosts need network namespaces: run as root)\n";
    return 77;
  }
  auto self = harness::SelfExePath();
  self_ = self.ok() ? *self : "";
  bool ok = SetUp();
  for (int app = 0; ok && app < kApps; ++app) ok = StartApp(app);
  start_ = SteadyClock::now();
  if (ok) {
    std::this_thread::sleep_for(std::chrono::seconds(2));
    Pump();
    start_fp_[0] = FootprintOf(a_.daemon->pid());
    start_fp_[1] = FootprintOf(b_.daemon->pid());
    // The last 10 s (at least) are quiet: no kill, no cut.
    const double quiet_s = 10;
    const double chaos_s = std::max(10.0, minutes_ * 60 - quiet_s - 2);
    Event("chaos for " + std::to_string(static_cast<int>(chaos_s)) + " s");
    Chaos(start_ + std::chrono::milliseconds(static_cast<int64_t>(chaos_s * 1000)));
  }
  if (ok && problems_.empty()) {
    if (!LinksUp(Millis(20000))) Problem("the link did not come back for the quiet phase");
    for (Run* r : current_) {
      if (r != nullptr) r->child->WriteStdin("quiet\n");
    }
    Event("quiet");
    auto until = SteadyClock::now() + std::chrono::seconds(10);
    while (SteadyClock::now() < until && problems_.empty()) {
      Pump();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (problems_.empty() && StopAndReport()) {
      Pump();
      end_fp_[0] = FootprintOf(a_.daemon->pid());
      end_fp_[1] = FootprintOf(b_.daemon->pid());
    }
  }
  Event("stopping");
  TearDown();
  return Summarize();
}

}  // namespace

int RunDriver(const Args& args) {
  // --drop-every N is a self-test of the checks (the run must fail, lost).
  Soak soak(args.Double("minutes", 2), args.U64("seed", 1), args.U64("drop-every", 0));
  return soak.Main();
}

}  // namespace mcdma::soak
