// Roles of mcdma_testapp that outlive their daemon: when the session ends
// (the daemon was killed, then restarted on the same socket as systemd
// would) the app connects again, gets a new session, sets up again and
// carries on. The kill-matrix tests (kill_matrix_test.cpp) use them.
//   resilient-serve  on every session: serves an echo service and exports a
//                    buffer filled with the pattern of --seed (readable,
//                    writable, granted to --allowed-peers). Stdin
//                    "check OFFSET LENGTH SEED" verifies a range of the
//                    buffer against a pattern (what a peer wrote there).
//   resilient-load   keeps one kind of traffic (--traffic calls, reads or
//                    writes) to a peer's service or export going from
//                    --threads threads, every byte verified. Stdin as
//                    peer-load's ("mark", "broken", "status") and "verify":
//                    one more operation of its kind, retried until it passes
//                    or 20 s passed (VERIFIED / VERIFY_FAILED).
// Both print READY once and RECONNECTED for every later session, and a
// final JSON line when stdin reaches EOF.
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "client_core.hpp"
#include "pattern.hpp"
#include "testapp.hpp"

namespace mcdma::itest {
namespace {

using SteadyClock = std::chrono::steady_clock;
constexpr auto kRetry = std::chrono::milliseconds(50);

// One session and what the role set up on it. Members in creation order:
// the buffers go before the client.
struct Conn {
  std::unique_ptr<Client> client;
  Buffer buffer;  // resilient-serve: the exported buffer
  uint64_t number = 0;
};

// The current session, shared by every thread of the role; a new one once
// the daemon ended the old one. Thread-safe.
class Reconnector {
 public:
  using Setup = std::function<Status(Conn&)>;
  Reconnector(ClientOptions options, Setup setup, std::atomic<bool>& stop)
      : options_(std::move(options)), setup_(std::move(setup)), stop_(stop) {}

  // The session in use, or a new one (connecting every 50 ms until a daemon
  // answers and setup passes); nullptr once `stop` is set.
  std::shared_ptr<Conn> Get() {
    std::lock_guard lock(mu_);
    if (current_ && !current_->client->core()->closed()) return current_;
    current_.reset();
    while (!stop_.load()) {
      auto c = Client::Connect(options_);
      if (c.ok()) {
        auto conn = std::make_shared<Conn>();
        conn->client = std::move(c).value();
        conn->number = ++sessions_;
        Status st = setup_(*conn);
        if (st.ok()) {
          current_ = conn;
          if (!ready_said_) {
            ready_said_ = true;
            Say("READY session=%llu pid=%d",
                static_cast<unsigned long long>(conn->client->info().session_id), getpid());
          } else {
            Say("RECONNECTED session=%llu n=%llu",
                static_cast<unsigned long long>(conn->client->info().session_id),
                static_cast<unsigned long long>(conn->number));
          }
          return current_;
        }
        std::fprintf(stderr, "resilient: setup on session %llu: %s\n",
                     static_cast<unsigned long long>(conn->number), st.ToString().c_str());
      }
      std::this_thread::sleep_for(kRetry);
    }
    return nullptr;
  }

  // Sessions opened so far. Never waits: Get may be connecting.
  uint64_t sessions() const { return sessions_.load(); }

 private:
  const ClientOptions options_;
  const Setup setup_;
  std::atomic<bool>& stop_;
  std::mutex mu_;
  std::shared_ptr<Conn> current_;      // GUARDED_BY(mu_)
  std::atomic<uint64_t> sessions_{0};  // sessions opened; written under mu_
  bool ready_said_ = false;            // GUARDED_BY(mu_)
};

// ---- resilient-serve ----

struct ServeCounts {
  std::atomic<uint64_t> calls{0};
  std::mutex mu;
  std::map<std::string, uint64_t> reply_errors;  // GUARDED_BY(mu)
};

}  // namespace

int RunResilientServe(const Args& args) {
  const std::string service = args.Need("service");
  const std::string export_name = args.Need("export");
  const uint64_t size = args.U64("size", 4 << 20);
  const uint64_t seed = args.U64("seed", 11);
  ExportOptions eo;
  eo.allow_read = true;
  eo.allow_write = true;
  eo.allowed_peers = SplitList(args.Str("allowed-peers"));
  auto counts = std::make_shared<ServeCounts>();
  ClientOptions o;
  o.socket = args.Need("socket");
  o.app_name = "testapp-resilient-serve";
  o.connect_timeout = std::chrono::milliseconds(3000);
  std::atomic<bool> stop{false};
  Reconnector rc(
      o,
      [&](Conn& c) -> Status {
        auto id = c.client->Serve(service, [counts](ServerCall& call) {
          ++counts->calls;
          Status st = call.Reply(call.payload());
          if (!st.ok()) {
            std::lock_guard lock(counts->mu);
            ++counts->reply_errors[CodeName(st.code())];
          }
        });
        if (!id.ok()) return id.status();
        auto buf = c.client->Alloc(size);
        if (!buf.ok()) return buf.status();
        c.buffer = *buf;
        FillPattern(c.buffer.data(), size, seed);
        return c.client->Export(c.buffer, export_name, eo);
      },
      stop);
  if (!rc.Get()) return 1;
  // Keeps a session up: notices the end of one within 20 ms.
  std::thread keeper([&] {
    while (!stop.load()) {
      (void)rc.Get();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  std::string line;
  while (std::getline(std::cin, line)) {
    unsigned long long off = 0, len = 0, s = 0;
    if (std::sscanf(line.c_str(), "check %llu %llu %llu", &off, &len, &s) == 3) {
      auto c = rc.Get();
      if (!c || off + len > c->buffer.size()) {
        Say("CHECKED ok=0 bytes=0 why=range");
        continue;
      }
      VerifyResult v = VerifyPattern(c->buffer.data() + off, len, s);
      Say("CHECKED ok=%d bytes=%llu first_bad=%llu", v.ok ? 1 : 0, v.ok ? len : 0ULL,
          static_cast<unsigned long long>(v.first_bad));
    } else if (line == "count") {
      Say("COUNT calls=%llu sessions=%llu", static_cast<unsigned long long>(counts->calls.load()),
          static_cast<unsigned long long>(rc.sessions()));
    }
  }
  stop.store(true);
  keeper.join();
  std::lock_guard lock(counts->mu);
  Say("{\"calls\":%llu,\"sessions\":%llu,\"reply_errors\":{%s}}",
      static_cast<unsigned long long>(counts->calls.load()),
      static_cast<unsigned long long>(rc.sessions()), JsonCounts(counts->reply_errors).c_str());
  return 0;
}

// ---- resilient-load ----
namespace {

enum class Traffic { kCalls, kReads, kWrites };

// Everything the load threads share: counters are atomics, the rest is
// under mu. Threads: every worker, and the main thread reading stdin.
struct LoadState {
  Traffic traffic = Traffic::kCalls;
  std::string service;  // "peer/service" (calls)
  std::string export_name;
  std::string peer;
  uint64_t region = 1 << 20;  // bytes per operation (reads, writes)
  uint64_t seed = 11;         // the exporter's pattern (reads)
  std::chrono::milliseconds timeout{3000};
  std::atomic<bool> stop{false};
  std::atomic<int64_t> mark_ns{INT64_MAX};
  std::atomic<int64_t> broken_ns{INT64_MAX};
  std::atomic<uint64_t> ok{0};
  std::atomic<uint64_t> verified_bytes{0};  // by operations that started after "broken"
  std::atomic<uint64_t> mismatch{0};
  std::atomic<int64_t> first_ok_ns{0};              // end of the first pass started after "broken"
  std::unique_ptr<std::atomic<int64_t>[]> current;  // per worker: start of its op, 0 = none

  std::mutex mu;
  std::map<std::string, uint64_t> early, pre, post;  // GUARDED_BY(mu): failures by code
  std::map<std::string, uint64_t> control;           // GUARDED_BY(mu): lookup/resolve/alloc
  int64_t max_overrun_ms = LLONG_MIN;                // GUARDED_BY(mu)
  int printed = 0;                                   // GUARDED_BY(mu)
};

void RecordFailure(LoadState& load, const char* kind, int64_t start_ns, int64_t end_ns,
                   const Status& st) {
  const int64_t mark = load.mark_ns.load();
  const int64_t broken = load.broken_ns.load();
  const std::string code = CodeName(st.code());
  std::lock_guard lock(load.mu);
  const char* cls = end_ns < mark ? "early" : (start_ns < broken ? "pre" : "post");
  (end_ns < mark ? load.early : start_ns < broken ? load.pre : load.post)[code]++;
  const int64_t elapsed_ms = (end_ns - start_ns) / 1000000;
  load.max_overrun_ms = std::max(load.max_overrun_ms, elapsed_ms - load.timeout.count());
  if (load.printed++ < 30) {
    std::fprintf(stderr, "resilient-load: %s (%s, %lld ms): %s\n", kind, cls,
                 static_cast<long long>(elapsed_ms), st.ToString().c_str());
  }
}

void RecordControl(LoadState& load, const char* what, const Status& st) {
  std::lock_guard lock(load.mu);
  ++load.control[std::string(what) + ":" + CodeName(st.code())];
}

void RecordPass(LoadState& load, int64_t start_ns, uint64_t bytes) {
  ++load.ok;
  if (start_ns < load.broken_ns.load()) return;
  load.verified_bytes += bytes;
  int64_t none = 0;
  load.first_ok_ns.compare_exchange_strong(none, NowNs());
}

// One worker's (or "verify"'s) view of the session: its buffers and the
// remote handle, made again on every new session.
struct Lane {
  std::shared_ptr<Conn> conn;
  Buffer src, dst;
  std::optional<RemoteBuffer> remote;
  uint64_t region_offset = 0;  // its range of the export
};

// Makes sure `lane` has a live session with its buffers and handle; false
// once stopping. A failed resolve waits 20 ms and tries again.
bool Ready(Reconnector& rc, LoadState& load, Lane& lane) {
  while (!load.stop.load()) {
    if (lane.conn && lane.conn->client->core()->closed()) {
      lane.remote.reset();
      lane.src = Buffer();
      lane.dst = Buffer();
      lane.conn.reset();
    }
    if (!lane.conn) {
      lane.conn = rc.Get();
      if (!lane.conn) return false;
    }
    if (load.traffic == Traffic::kCalls) return true;
    Client& c = *lane.conn->client;
    if (!lane.src.valid()) {
      auto s = c.Alloc(load.region);
      auto d = s.ok() ? c.Alloc(load.region) : s;
      if (!s.ok() || !d.ok()) {
        RecordControl(load, "alloc", s.ok() ? d.status() : s.status());
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        continue;
      }
      lane.src = *s;
      lane.dst = *d;
    }
    if (!lane.remote) {
      auto r = c.Resolve(load.export_name, load.peer);
      if (!r.ok()) {
        RecordControl(load, "resolve", r.status());
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        continue;
      }
      lane.remote = *r;
    }
    return true;
  }
  return false;
}

// One operation of the load's kind on `lane` (calls, reads, or a write
// with every 4th one read back); true if it passed with every byte right.
// Failures are recorded; a failed handle is dropped for the next try.
bool OneOp(LoadState& load, Lane& lane, int worker, uint64_t i, bool verify_all,
           uint64_t* verified) {
  Client& c = *lane.conn->client;
  const uint32_t pid = static_cast<uint32_t>(getpid());
  auto begin = [&] {
    int64_t t = NowNs();
    if (worker >= 0) load.current[worker].store(t);
    return t;
  };
  auto end = [&] {
    if (worker >= 0) load.current[worker].store(0);
    return NowNs();
  };
  *verified = 0;
  if (load.traffic == Traffic::kCalls) {
    std::vector<std::byte> req;
    uint32_t thread = static_cast<uint32_t>(worker < 0 ? 99 : worker);
    MakeCallPayload(req, CallSize(load.seed, pid, thread, i, 65536), load.seed, pid, thread, i);
    int64_t start = begin();
    Result<Message> r = c.CallAsync(load.service, req, load.timeout).Wait();
    int64_t stop = end();
    if (!r.ok()) {
      RecordFailure(load, "call", start, stop, r.status());
      // The id changes when the server or its daemon restarts.
      (void)c.core()->ServiceId(load.service, /*refresh=*/true);
      return false;
    }
    if (r->size() != req.size() ||
        (!req.empty() && std::memcmp(r->data(), req.data(), req.size()) != 0)) {
      ++load.mismatch;
      Say("MISMATCH call worker=%d seq=%llu", worker, static_cast<unsigned long long>(i));
      return false;
    }
    *verified = req.size();
    RecordPass(load, start, req.size());
    return true;
  }
  const uint64_t n = load.region;
  auto transfer = [&](bool write, uint64_t remote_off, const Buffer& local) {
    int64_t start = begin();
    Result<uint64_t> r = write ? c.Write(*lane.remote, remote_off, local, 0, n, load.timeout)
                               : c.Read(*lane.remote, remote_off, local, 0, n, load.timeout);
    int64_t stop = end();
    if (!r.ok()) {
      RecordFailure(load, write ? "write" : "read", start, stop, r.status());
      (void)c.Release(*lane.remote);
      lane.remote.reset();
      return std::optional<int64_t>();
    }
    if (*r != n) {
      ++load.mismatch;
      Say("MISMATCH %s moved %llu of %llu bytes", write ? "write" : "read",
          static_cast<unsigned long long>(*r), static_cast<unsigned long long>(n));
      return std::optional<int64_t>();
    }
    return std::optional<int64_t>(start);
  };
  if (load.traffic == Traffic::kReads) {
    std::memset(lane.dst.data(), 0, n);
    auto start = transfer(false, lane.region_offset, lane.dst);
    if (!start) return false;
    VerifyResult v = VerifyPattern(lane.dst.data(), n, load.seed, lane.region_offset);
    if (!v.ok) {
      ++load.mismatch;
      Say("MISMATCH read at %llu", static_cast<unsigned long long>(v.first_bad));
      return false;
    }
    *verified = n;
    RecordPass(load, *start, n);
    return true;
  }
  const uint64_t s = Mix(load.seed ^ (uint64_t{pid} << 32) ^ (uint64_t(worker + 1) << 24) ^ i);
  FillPattern(lane.src.data(), n, s);
  auto start = transfer(true, lane.region_offset, lane.src);
  if (!start) return false;
  if (verify_all || i % 4 == 3) {
    std::memset(lane.dst.data(), 0, n);
    if (!transfer(false, lane.region_offset, lane.dst)) return false;
    VerifyResult v = VerifyPattern(lane.dst.data(), n, s);
    if (!v.ok) {
      ++load.mismatch;
      Say("MISMATCH write read back wrong at %llu", static_cast<unsigned long long>(v.first_bad));
      return false;
    }
    *verified = n;
  }
  if (verify_all)
    Say("WROTE offset=%llu length=%llu seed=%llu",
        static_cast<unsigned long long>(lane.region_offset), static_cast<unsigned long long>(n),
        static_cast<unsigned long long>(s));
  RecordPass(load, *start, *verified);
  return true;
}

void Worker(Reconnector& rc, LoadState& load, int worker) {
  Lane lane;
  lane.region_offset = static_cast<uint64_t>(worker + 1) * load.region;
  uint64_t verified = 0;
  for (uint64_t i = 0; Ready(rc, load, lane); ++i) {
    if (!OneOp(load, lane, worker, i, /*verify_all=*/false, &verified)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
}

// "verify": one operation on region 0, retried until it passes (20 s).
void Verify(Reconnector& rc, LoadState& load) {
  const int64_t start = NowNs();
  const int64_t bound = start + 20'000'000'000LL;
  Lane lane;
  uint64_t verified = 0;
  for (uint64_t i = 1'000'000; NowNs() < bound && Ready(rc, load, lane); ++i) {
    if (OneOp(load, lane, -1, i, /*verify_all=*/true, &verified)) {
      Say("VERIFIED bytes=%llu ms=%lld session=%llu", static_cast<unsigned long long>(verified),
          static_cast<long long>((NowNs() - start) / 1000000),
          static_cast<unsigned long long>(lane.conn->client->info().session_id));
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  Say("VERIFY_FAILED ms=%lld", static_cast<long long>((NowNs() - start) / 1000000));
}

}  // namespace

int RunResilientLoad(const Args& args) {
  LoadState load;
  const std::string traffic = args.Need("traffic");
  if (traffic == "calls") {
    load.traffic = Traffic::kCalls;
    load.service = args.Need("service");
  } else if (traffic == "reads" || traffic == "writes") {
    load.traffic = traffic == "reads" ? Traffic::kReads : Traffic::kWrites;
    load.export_name = args.Need("export");
    load.peer = args.Str("peer");
  } else {
    std::fprintf(stderr, "resilient-load: --traffic calls|reads|writes, not '%s'\n",
                 traffic.c_str());
    return 2;
  }
  load.region = args.U64("region-bytes", 1 << 20);
  load.seed = args.U64("seed", 11);
  load.timeout = std::chrono::milliseconds(args.U64("timeout-ms", 3000));
  const int threads = static_cast<int>(args.U64("threads", 3));
  load.current = std::make_unique<std::atomic<int64_t>[]>(threads);
  for (int i = 0; i < threads; ++i) load.current[i].store(0);
  ClientOptions o;
  o.socket = args.Need("socket");
  o.app_name = "testapp-resilient-load";
  o.handler_threads = 0;
  o.connect_timeout = std::chrono::milliseconds(3000);
  Reconnector rc(
      o, [](Conn&) { return Status::Ok(); }, load.stop);
  if (!rc.Get()) return 1;
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) workers.emplace_back(Worker, std::ref(rc), std::ref(load), t);
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line == "mark") {
      load.mark_ns.store(NowNs());
      Say("MARKED");
    } else if (line == "broken") {
      load.broken_ns.store(NowNs());
      Say("BROKEN");
    } else if (line == "status") {
      const int64_t broken = load.broken_ns.load();
      int pre_inflight = 0;
      for (int i = 0; i < threads; ++i) {
        int64_t s = load.current[i].load();
        if (s != 0 && s < broken) ++pre_inflight;
      }
      int64_t first = load.first_ok_ns.load();
      Say("STATUS pre_inflight=%d ok=%llu verified_bytes=%llu sessions=%llu first_ok_ms=%lld",
          pre_inflight, static_cast<unsigned long long>(load.ok.load()),
          static_cast<unsigned long long>(load.verified_bytes.load()),
          static_cast<unsigned long long>(rc.sessions()),
          static_cast<long long>(first == 0 ? -1 : (first - broken) / 1000000));
    } else if (line == "verify") {
      Verify(rc, load);
    }
  }
  load.stop.store(true);
  for (auto& w : workers) w.join();
  std::lock_guard lock(load.mu);
  Say("{\"ok\":%llu,\"verified_bytes\":%llu,\"mismatch\":%llu,\"sessions\":%llu,\"early\":{%s},"
      "\"pre\":{%s},\"post\":{%s},\"control\":{%s},\"max_overrun_ms\":%lld}",
      static_cast<unsigned long long>(load.ok.load()),
      static_cast<unsigned long long>(load.verified_bytes.load()),
      static_cast<unsigned long long>(load.mismatch.load()),
      static_cast<unsigned long long>(rc.sessions()), JsonCounts(load.early).c_str(),
      JsonCounts(load.pre).c_str(), JsonCounts(load.post).c_str(), JsonCounts(load.control).c_str(),
      static_cast<long long>(load.max_overrun_ms == LLONG_MIN ? 0 : load.max_overrun_ms));
  return 0;
}

}  // namespace mcdma::itest
