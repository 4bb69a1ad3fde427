// One app of the soak (`mcdma_soak app`): serves "svc-N" (echo, and a sink
// for notifications) and exports "exp-N" from one session, and from three
// more sessions of its own keeps calls, notifications and bulk
// writes/reads going to the other apps, on this host and the other one.
// Every byte is checked; every message carries a sequence number
// (soak_wire.hpp) so that the driver can prove none was lost or delivered
// twice.
//
// Protocol with the driver, one line each on stdout:
//   READY inc=I pid=P          set up (I: this incarnation, random)
//   F KIND CODE                an operation failed (KIND: call, notify,
//                              write, read, who, lookup, resolve, alloc)
//   BAD WHAT ...               a wrong byte, a duplicate, a misrouted message
//   OVERDUE KIND MS            an operation ended later than its deadline
//                              plus 3 s (stuck)
//   S call=N notify=N read=N write=N   every second: operations passed
// Stdin: "quiet" (QUIET; counts from now on are reported as q*), "stop"
// (ends the traffic: STOPPED), "report" (SENT/RECV ledgers, FINAL, END).
// EOF ends the app.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "client_core.hpp"
#include "soak.hpp"
#include "soak_wire.hpp"

namespace mcdma::soak {
namespace {

using SteadyClock = std::chrono::steady_clock;
constexpr int64_t kOverdueSlackMs = 3000;

std::mutex g_out_mu;
void Out(const std::string& line) {
  std::lock_guard lock(g_out_mu);
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

uint64_t RegionSeed(int app) { return itest::Mix(0x5EEDULL ^ static_cast<uint64_t>(app)); }

struct Config {
  std::string socket;
  int self = 0;
  std::vector<std::string> hosts;  // app index -> its host id
  uint64_t region = 256 << 10;
  std::chrono::milliseconds timeout{5000};
  uint64_t seed = 1;
  uint64_t inc = 0;
  uint64_t drop_every = 0;  // self-test of the driver's checks: forget every Nth notification

  bool Local(int j) const { return hosts[j] == hosts[self]; }
  std::string Service(int j) const {
    return (Local(j) ? "" : hosts[j] + "/") + "svc-" + std::to_string(j);
  }
  std::string Export(int j) const { return "exp-" + std::to_string(j); }
  std::string Peer(int j) const { return Local(j) ? "" : hosts[j]; }
};

// Counters and ledgers every thread shares. Counters are atomics; the rest
// is under mu.
struct Shared {
  std::atomic<bool> stop{false};
  std::atomic<bool> quiet{false};
  std::atomic<uint64_t> ok[4] = {};        // call, notify, read, write
  std::atomic<uint64_t> quiet_ok[4] = {};  // the same since "quiet"
  std::atomic<uint64_t> dup{0}, misrouted{0}, mismatch{0}, overdue{0};

  std::mutex mu;
  // Notifications received, by sender (GUARDED_BY(mu)).
  std::map<uint64_t, SeqRanges> received;
  // Calls received, by sender: only to tell duplicates (GUARDED_BY(mu)).
  std::map<uint64_t, SeqRanges> calls_received;
  // Notifications sent: (target incarnation, sender) -> sent, failed.
  struct Sent {
    uint64_t n = 0;
    std::vector<uint64_t> failed;
  };
  std::map<std::pair<uint64_t, uint64_t>, Sent> sent;  // GUARDED_BY(mu)
  uint64_t dropped = 0;                                // GUARDED_BY(mu): --drop-every
};

enum Op { kCallOp = 0, kNotifyOp = 1, kReadOp = 2, kWriteOp = 3 };

void Passed(Shared& sh, Op op) {
  ++sh.ok[op];
  if (sh.quiet.load()) ++sh.quiet_ok[op];
}

void Failed(const char* kind, const Status& st) {
  Out(std::string("F ") + kind + " " + CodeName(st.code()));
}

// Times one operation and reports it if it outlived its deadline by far.
class Timed {
 public:
  Timed(Shared& sh, const Config& cfg, const char* kind)
      : sh_(sh), cfg_(cfg), kind_(kind), start_(SteadyClock::now()) {}
  ~Timed() {
    auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - start_).count();
    if (ms > cfg_.timeout.count() + kOverdueSlackMs) {
      ++sh_.overdue;
      Out(std::string("OVERDUE ") + kind_ + " " + std::to_string(ms));
    }
  }

 private:
  Shared& sh_;
  const Config& cfg_;
  const char* kind_;
  SteadyClock::time_point start_;
};

// A CALL or NOTIFY to exactly `service_id` (no look-up, no retry): the
// id names one registration, so the WHO answer on it names the receiver.
Result<Message> SendTo(Client& c, uint64_t service_id, std::span<const std::byte> payload,
                       std::chrono::milliseconds timeout, shm::Op op) {
  internal::Submission sub;
  sub.desc.opcode = static_cast<uint8_t>(op);
  sub.desc.target = service_id;
  sub.payload = payload;
  sub.op = std::make_shared<internal::OpState>();
  sub.op->service_id = service_id;
  Status st = c.core()->Submit(std::span<internal::Submission>(&sub, 1), timeout);
  if (!st.ok()) return st;
  return internal::ClientCore::MakeFuture<Message>(sub.op).Wait();
}

// A target app's service as one sender thread knows it.
struct Bound {
  uint64_t id = 0;
  uint64_t inc = 0;
};

// Looks j's service up and asks who serves it; nullopt (reported) on
// failure.
std::optional<Bound> Bind(Client& c, const Config& cfg, Shared& sh, int j, uint64_t sender) {
  auto id = c.core()->ServiceId(cfg.Service(j), /*refresh=*/true);
  if (!id.ok()) {
    Failed("lookup", id.status());
    return std::nullopt;
  }
  Header h;
  h.kind = Kind::kWho;
  h.sender = sender;
  std::vector<std::byte> req = MakeMessage(h, sizeof(h));
  Result<Message> r = [&] {
    Timed t(sh, cfg, "who");
    return SendTo(c, *id, req, cfg.timeout, shm::Op::kCall);
  }();
  if (!r.ok()) {
    Failed("who", r.status());
    return std::nullopt;
  }
  if (r->size() != 8) {
    ++sh.mismatch;
    Out("BAD who reply of " + std::to_string(r->size()) + " bytes");
    return std::nullopt;
  }
  Bound b{*id, 0};
  std::memcpy(&b.inc, r->data(), 8);
  return b;
}

int PickTarget(const Config& cfg, std::mt19937_64& rng) {
  int n = static_cast<int>(cfg.hosts.size());
  int j = static_cast<int>(rng() % (n - 1));
  return j >= cfg.self ? j + 1 : j;
}

std::unique_ptr<Client> Connect(const Config& cfg, const char* what) {
  ClientOptions o;
  o.socket = cfg.socket;
  o.app_name = std::string("soak-") + std::to_string(cfg.self) + "-" + what;
  o.arena_bytes = 4 << 20;
  o.connect_timeout = std::chrono::milliseconds(10000);
  auto c = Client::Connect(o);
  if (!c.ok()) {
    Out(std::string("BAD connect ") + what + " " + CodeName(c.status().code()));
    return nullptr;
  }
  return std::move(c).value();
}

// Calls (thread 1) or notifications (thread 2) to random targets.
void MessageThread(const Config& cfg, Shared& sh, bool notify) {
  auto client = Connect(cfg, notify ? "notify" : "call");
  if (!client) return;
  const uint64_t sender = cfg.inc * 8 + (notify ? 2 : 1);
  std::mt19937_64 rng(cfg.seed ^ sender);
  std::map<int, Bound> bound;
  std::map<uint64_t, uint64_t> next_seq;  // by target incarnation
  while (!sh.stop.load()) {
    int j = PickTarget(cfg, rng);
    if (bound.count(j) == 0) {
      auto b = Bind(*client, cfg, sh, j, sender);
      if (!b) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        continue;
      }
      bound[j] = *b;
    }
    const Bound b = bound[j];
    Header h;
    h.kind = notify ? Kind::kNotify : Kind::kCall;
    h.sender = sender;
    h.target_inc = b.inc;
    h.seq = next_seq[b.inc]++;
    std::vector<std::byte> msg = MakeMessage(h, sizeof(h) + rng() % (notify ? 4096 : 16384));
    if (notify) {
      std::lock_guard lock(sh.mu);
      sh.sent[{b.inc, sender}].n = h.seq + 1;
    }
    Result<Message> r = [&] {
      Timed t(sh, cfg, notify ? "notify" : "call");
      return SendTo(*client, b.id, msg, cfg.timeout, notify ? shm::Op::kNotify : shm::Op::kCall);
    }();
    if (!r.ok()) {
      Failed(notify ? "notify" : "call", r.status());
      if (notify) {
        std::lock_guard lock(sh.mu);
        sh.sent[{b.inc, sender}].failed.push_back(h.seq);
      }
      bound.erase(j);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    if (!notify && (r->size() != msg.size() || std::memcmp(r->data(), msg.data(), msg.size()))) {
      ++sh.mismatch;
      Out("BAD call reply differs from the request (seq " + std::to_string(h.seq) + ")");
      continue;
    }
    Passed(sh, notify ? kNotifyOp : kCallOp);
  }
}

// Writes its own slot of a random target's export and reads it back, then
// reads the target's pattern region; every byte checked.
void BulkThread(const Config& cfg, Shared& sh) {
  auto client = Connect(cfg, "bulk");
  if (!client) return;
  std::mt19937_64 rng(cfg.seed ^ cfg.inc ^ 0xB01CULL);
  std::optional<Buffer> src, dst;
  std::map<int, RemoteBuffer> handles;
  const uint64_t n = cfg.region;
  const uint64_t slot = static_cast<uint64_t>(cfg.self + 1) * n;
  for (uint64_t i = 0; !sh.stop.load(); ++i) {
    if (!src) {
      auto s = client->Alloc(n);
      auto d = s.ok() ? client->Alloc(n) : s;
      if (!s.ok() || !d.ok()) {
        Failed("alloc", s.ok() ? d.status() : s.status());
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        continue;
      }
      src = *s;
      dst = *d;
    }
    int j = PickTarget(cfg, rng);
    if (handles.count(j) == 0) {
      auto r = client->Resolve(cfg.Export(j), cfg.Peer(j));
      if (!r.ok()) {
        Failed("resolve", r.status());
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        continue;
      }
      handles[j] = *r;
    }
    const RemoteBuffer& remote = handles[j];
    auto step = [&](const char* kind, bool write, uint64_t off, const Buffer& local) {
      Result<uint64_t> r = [&] {
        Timed t(sh, cfg, kind);
        return write ? client->Write(remote, off, local, 0, n, cfg.timeout)
                     : client->Read(remote, off, local, 0, n, cfg.timeout);
      }();
      if (r.ok() && *r == n) return true;
      if (r.ok()) {
        ++sh.mismatch;
        Out(std::string("BAD ") + kind + " moved " + std::to_string(*r) + " bytes");
      } else {
        Failed(kind, r.status());
      }
      (void)client->Release(remote);
      handles.erase(j);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      return false;
    };
    const uint64_t s = itest::Mix(cfg.inc ^ (i << 8));
    itest::FillPattern(src->data(), n, s);
    std::memset(dst->data(), 0, n);
    if (!step("write", true, slot, *src)) continue;
    Passed(sh, kWriteOp);
    if (!step("read", false, slot, *dst)) continue;
    if (!itest::VerifyPattern(dst->data(), n, s).ok) {
      ++sh.mismatch;
      Out("BAD read back of own slot at app " + std::to_string(j));
      continue;
    }
    Passed(sh, kReadOp);
    std::memset(dst->data(), 0, n);
    if (!step("read", false, 0, *dst)) continue;
    if (!itest::VerifyPattern(dst->data(), n, RegionSeed(j)).ok) {
      ++sh.mismatch;
      Out("BAD pattern region of app " + std::to_string(j));
      continue;
    }
    Passed(sh, kReadOp);
  }
}

// The serving session's handler: WHO answers this incarnation; calls are
// echoed; every message is checked and its sequence number recorded.
void Handle(const Config& cfg, Shared& sh, ServerCall& call) {
  std::span<const std::byte> p = call.payload();
  Header h;
  if (!ReadMessage(p.data(), p.size(), &h)) {
    ++sh.mismatch;
    Out("BAD message of " + std::to_string(p.size()) + " bytes fails its checks");
    if (!call.one_way()) (void)call.Reply(p);
    return;
  }
  if (h.kind == Kind::kWho) {
    (void)call.Reply(std::span<const std::byte>(reinterpret_cast<const std::byte*>(&cfg.inc), 8));
    return;
  }
  if (h.target_inc != cfg.inc) {
    ++sh.misrouted;
    Out("BAD misrouted: meant for incarnation " + std::to_string(h.target_inc));
  }
  bool fresh;
  {
    std::lock_guard lock(sh.mu);
    if (call.one_way() && cfg.drop_every > 0 && ++sh.dropped % cfg.drop_every == 0) return;
    fresh = (call.one_way() ? sh.received : sh.calls_received)[h.sender].Add(h.seq);
  }
  if (!fresh) {
    ++sh.dup;
    Out("BAD duplicate or out of order: sender " + std::to_string(h.sender) + " seq " +
        std::to_string(h.seq));
  }
  if (!call.one_way()) (void)call.Reply(p);
}

void Report(const Config& cfg, Shared& sh) {
  std::lock_guard lock(sh.mu);
  for (const auto& [key, s] : sh.sent) {
    std::string failed;
    for (uint64_t f : s.failed) failed += (failed.empty() ? "" : ",") + std::to_string(f);
    Out("SENT " + std::to_string(key.first) + " " + std::to_string(key.second) + " " +
        std::to_string(s.n) + " " + (failed.empty() ? "-" : failed));
  }
  for (const auto& [sender, r] : sh.received) {
    Out("RECV " + std::to_string(sender) + " " + r.Format());
  }
  auto n = [](const std::atomic<uint64_t>& a) { return std::to_string(a.load()); };
  Out("FINAL inc=" + std::to_string(cfg.inc) + " call=" + n(sh.ok[0]) + " notify=" + n(sh.ok[1]) +
      " read=" + n(sh.ok[2]) + " write=" + n(sh.ok[3]) + " qcall=" + n(sh.quiet_ok[0]) +
      " qnotify=" + n(sh.quiet_ok[1]) + " qread=" + n(sh.quiet_ok[2]) +
      " qwrite=" + n(sh.quiet_ok[3]) + " dup=" + n(sh.dup) + " misrouted=" + n(sh.misrouted) +
      " mismatch=" + n(sh.mismatch) + " overdue=" + n(sh.overdue));
  Out("END");
}

}  // namespace

int RunApp(const Args& args) {
  Config cfg;
  cfg.socket = args.Need("socket");
  cfg.self = static_cast<int>(args.U64("index"));
  cfg.hosts = SplitList(args.Need("hosts"));
  cfg.region = args.U64("region-bytes", 256 << 10);
  cfg.timeout = std::chrono::milliseconds(args.U64("timeout-ms", 5000));
  cfg.seed = args.U64("seed", 1);
  cfg.drop_every = args.U64("drop-every", 0);
  cfg.inc = (std::random_device{}() | (uint64_t{std::random_device{}()} << 32)) >> 4;
  if (cfg.self < 0 || cfg.self >= static_cast<int>(cfg.hosts.size()) || cfg.hosts.size() < 2) {
    std::fprintf(stderr, "soak app: --index must name one of --hosts\n");
    return 2;
  }
  Shared sh;
  auto server = Connect(cfg, "serve");
  if (!server) return 1;
  auto sid = server->Serve("svc-" + std::to_string(cfg.self),
                           [&](ServerCall& call) { Handle(cfg, sh, call); });
  Result<Buffer> buf = sid.status();
  if (sid.ok()) buf = server->Alloc((cfg.hosts.size() + 1) * cfg.region);
  if (!buf.ok()) {
    Out(std::string("BAD setup ") + CodeName(buf.status().code()));
    std::fprintf(stderr, "soak app: setup: %s\n", buf.status().ToString().c_str());
    return 1;
  }
  itest::FillPattern(buf->data(), cfg.region, RegionSeed(cfg.self));
  ExportOptions eo;
  eo.allow_write = true;
  for (const auto& h : cfg.hosts) {
    if (h != cfg.hosts[cfg.self] &&
        std::find(eo.allowed_peers.begin(), eo.allowed_peers.end(), h) == eo.allowed_peers.end())
      eo.allowed_peers.push_back(h);
  }
  if (Status st = server->Export(*buf, cfg.Export(cfg.self), eo); !st.ok()) {
    Out(std::string("BAD setup export ") + CodeName(st.code()));
    return 1;
  }
  Out("READY inc=" + std::to_string(cfg.inc) + " pid=" + std::to_string(getpid()));
  std::vector<std::thread> threads;
  threads.emplace_back(MessageThread, std::cref(cfg), std::ref(sh), false);
  threads.emplace_back(MessageThread, std::cref(cfg), std::ref(sh), true);
  threads.emplace_back(BulkThread, std::cref(cfg), std::ref(sh));
  std::atomic<bool> done{false};
  std::thread stats([&] {
    while (!done.load()) {
      for (int i = 0; i < 10 && !done.load(); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      Out("S call=" + std::to_string(sh.ok[0].load()) + " notify=" + std::to_string(sh.ok[1]) +
          " read=" + std::to_string(sh.ok[2]) + " write=" + std::to_string(sh.ok[3]));
    }
  });
  auto stop_traffic = [&] {
    sh.stop.store(true);
    for (auto& t : threads) t.join();
    threads.clear();
  };
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line == "quiet") {
      sh.quiet.store(true);
      Out("QUIET");
    } else if (line == "stop") {
      stop_traffic();
      Out("STOPPED");
    } else if (line == "report") {
      Report(cfg, sh);
    }
  }
  stop_traffic();
  done.store(true);
  stats.join();
  return 0;
}

}  // namespace mcdma::soak
