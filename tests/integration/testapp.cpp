// mcdma_testapp main: role dispatch, argument parsing, and the two call roles
// ("serve": an echo server; "call": many threads of byte-verified calls).
#include "testapp.hpp"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <iostream>
#include <mutex>
#include <thread>
#include <vector>

#include "pattern.hpp"

namespace mcdma::itest {

std::string JsonCounts(const std::map<std::string, uint64_t>& counts) {
  std::string out;
  for (const auto& [code, n] : counts) {
    out += (out.empty() ? "" : ",") + ("\"" + code + "\":" + std::to_string(n));
  }
  return out;
}

std::unique_ptr<Client> ConnectOrDie(const Args& args, const char* role, ClientOptions options) {
  options.socket = args.Need("socket");
  options.app_name = std::string("testapp-") + role;
  auto c = Client::Connect(options);
  if (!c.ok()) {
    std::fprintf(stderr, "%s: connect: %s\n", role, c.status().ToString().c_str());
    Say("{\"ok\":0,\"error\":\"connect: %s\"}", CodeName(c.status().code()));
    std::exit(1);
  }
  return std::move(c).value();
}

void Progress::Tick(uint64_t n) {
  std::lock_guard lock(mu_);
  auto now = std::chrono::steady_clock::now();
  if (n > 1 && now - last_ < std::chrono::milliseconds(50)) return;
  last_ = now;
  Say("%s %llu", what_, static_cast<unsigned long long>(n));
}

void WaitForStdinEof() {
  char buf[256];
  while (true) {
    ssize_t n = read(0, buf, sizeof(buf));
    if (n == 0) return;
    if (n < 0 && errno != EINTR) return;
  }
}

// ---- serve ----
namespace {
struct Stall {
  std::atomic<uint64_t> calls{0};
  std::mutex mu;
  std::condition_variable cv;
  bool released = false;  // GUARDED_BY(mu)
};

struct Served {
  std::atomic<uint64_t> calls{0};
  std::atomic<uint64_t> notifies{0};
  std::atomic<uint64_t> bytes{0};
};
}  // namespace

int RunServe(const Args& args) {
  ClientOptions o;
  o.handler_threads = static_cast<int>(args.U64("handler-threads", 0));
  auto client = ConnectOrDie(args, "serve", o);
  std::string service = args.Need("service");
  // --corrupt-every N: flip one byte of every Nth non-empty reply (a
  // self-test of the callers' checks; never used against the daemon).
  const uint64_t corrupt_every = args.U64("corrupt-every", 0);
  auto replies = std::make_shared<std::atomic<uint64_t>>(0);
  // --stall-after N: after N calls the handler blocks (and with it this
  // app's progress thread) until a line "unstall" arrives on stdin.
  const uint64_t stall_after = args.U64("stall-after", 0);
  auto stall = std::make_shared<Stall>();
  // What the handler saw, for the "count" command: calls, notifications and
  // their payload bytes. Notifications are counted and never replied to.
  auto served = std::make_shared<Served>();
  auto id = client->Serve(
      service, [corrupt_every, replies, stall_after, stall, served](ServerCall& call) {
        if (call.one_way()) {
          ++served->notifies;
          served->bytes += call.payload().size();
          return;
        }
        ++served->calls;
        served->bytes += call.payload().size();
        if (stall_after > 0 && stall->calls.fetch_add(1) == stall_after) {
          Say("STALLED");
          std::unique_lock lock(stall->mu);
          stall->cv.wait(lock, [&] { return stall->released; });
        }
        Status st;
        if (corrupt_every > 0 && !call.payload().empty() && ++*replies % corrupt_every == 0) {
          std::vector<std::byte> bad(call.payload().begin(), call.payload().end());
          bad.back() ^= std::byte{0x01};
          st = call.Reply(bad);
        } else {
          st = call.Reply(call.payload());
        }
        if (!st.ok()) std::fprintf(stderr, "serve: reply: %s\n", st.ToString().c_str());
      });
  if (!id.ok()) {
    std::fprintf(stderr, "serve: Serve(%s): %s\n", service.c_str(), id.status().ToString().c_str());
    return 1;
  }
  Say("READY session=%llu pid=%d", static_cast<unsigned long long>(client->info().session_id),
      getpid());
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line == "unstall") {
      std::lock_guard lock(stall->mu);
      stall->released = true;
      stall->cv.notify_all();
      Say("UNSTALLED");
    } else if (line == "count") {
      Say("COUNT calls=%llu notifies=%llu bytes=%llu",
          static_cast<unsigned long long>(served->calls.load()),
          static_cast<unsigned long long>(served->notifies.load()),
          static_cast<unsigned long long>(served->bytes.load()));
    }
  }
  std::lock_guard lock(stall->mu);
  stall->released = true;
  stall->cv.notify_all();
  return 0;
}

// ---- call ----
namespace {

struct CallTotals {
  bool stop_on_error = false;  // --stop-on-error: every thread stops at the first failure
  bool log_sizes = false;      // --log-sizes: request sizes spread evenly over powers of two
  std::atomic<uint64_t> ok{0};
  std::atomic<uint64_t> bytes{0};  // request bytes of the calls that passed
  std::atomic<uint64_t> failed{0};
  std::atomic<uint64_t> mismatch{0};
  std::mutex mu;
  std::map<std::string, uint64_t> errors;  // GUARDED_BY(mu): code name -> count
  int reported = 0;                        // GUARDED_BY(mu)
};

void Report(CallTotals& t, const std::string& what) {
  std::lock_guard lock(t.mu);
  if (t.reported++ < 10) std::fprintf(stderr, "call: %s\n", what.c_str());
}

// Request sizes. By default CallSize's uniform spread; with --log-sizes the
// exponent is uniform instead (as many 10-byte as 100-KiB requests), so a
// 1 MiB maximum does not make the average call half a megabyte. Either way
// sequence numbers 0, 1 and 2 (mod 97) are 0 bytes, 1 byte and the maximum.
uint64_t RequestSize(const CallTotals& t, uint64_t seed, uint32_t pid, uint32_t thread,
                     uint64_t seq, uint64_t max_size) {
  if (!t.log_sizes || seq % 97 < 3) return CallSize(seed, pid, thread, seq, max_size);
  uint64_t r = Mix(CallSeed(seed, pid, thread, seq) ^ 0x5A5A5A5AULL);
  uint64_t e = r % 21;  // 2^0 .. 2^20
  uint64_t size = (uint64_t{1} << e) + ((r >> 8) % (uint64_t{1} << e));
  return std::min(size, max_size);
}

struct InFlight {
  uint64_t seq = 0;
  std::vector<std::byte> request;
  Future<Message> future;
};

// One caller thread: `calls` calls with up to `depth` in flight, each reply
// compared byte for byte with the request it answers. Sequence numbers are
// checked too: a reply must carry exactly the (thread, pid, seq) header of its
// request, and each seq is answered once.
void CallerThread(Client& client, const std::string& service, uint32_t thread, uint64_t calls,
                  uint64_t depth, uint64_t max_payload, uint64_t seed,
                  std::chrono::milliseconds timeout, CallTotals& t) {
  const uint32_t pid = static_cast<uint32_t>(getpid());
  std::deque<InFlight> window;
  std::vector<uint8_t> answered(calls, 0);
  auto finish_one = [&] {
    InFlight f = std::move(window.front());
    window.pop_front();
    Result<Message> r = f.future.Wait();
    if (!r.ok()) {
      ++t.failed;
      std::lock_guard lock(t.mu);
      ++t.errors[CodeName(r.status().code())];
      if (t.reported++ < 10) {
        std::fprintf(stderr, "call: thread %u seq %llu: %s\n", thread,
                     static_cast<unsigned long long>(f.seq), r.status().ToString().c_str());
      }
      return;
    }
    const Message& m = r.value();
    bool same = m.size() == f.request.size() &&
                (m.size() == 0 || std::memcmp(m.data(), f.request.data(), m.size()) == 0);
    if (!same) {
      ++t.mismatch;
      Report(t, "thread " + std::to_string(thread) + " seq " + std::to_string(f.seq) +
                    ": reply of " + std::to_string(m.size()) +
                    " bytes differs from the request of " + std::to_string(f.request.size()) +
                    " bytes");
      return;
    }
    // The header names the request; with memcmp equal this re-checks that
    // each sequence number is answered exactly once.
    uint64_t seq = f.seq;
    if (m.size() >= 16) std::memcpy(&seq, m.data() + 8, 8);
    if (seq >= calls || answered[seq]++ != 0) {
      ++t.mismatch;
      Report(t, "thread " + std::to_string(thread) + ": seq " + std::to_string(seq) +
                    " answered twice");
      return;
    }
    ++t.ok;
    t.bytes += m.size();
  };
  for (uint64_t seq = 0; seq < calls; ++seq) {
    if (window.size() >= depth) finish_one();
    if (t.stop_on_error && t.failed.load() + t.mismatch.load() > 0) break;
    InFlight f;
    f.seq = seq;
    MakeCallPayload(f.request, RequestSize(t, seed, pid, thread, seq, max_payload), seed, pid,
                    thread, seq);
    f.future = client.CallAsync(service, f.request, timeout);
    window.push_back(std::move(f));
  }
  while (!window.empty()) finish_one();
}

}  // namespace

int RunCall(const Args& args) {
  auto client = ConnectOrDie(args, "call");
  std::string service = args.Need("service");
  uint64_t threads = args.U64("threads", 8);
  uint64_t calls = args.U64("calls", 10000);
  uint64_t depth = std::max<uint64_t>(1, args.U64("depth", 4));
  uint64_t max_payload = args.U64("max-payload", 65536);
  uint64_t seed = args.U64("seed", 1);
  auto timeout = std::chrono::milliseconds(args.U64("timeout-ms", 30000));
  CallTotals totals;
  totals.stop_on_error = args.Has("stop-on-error");
  totals.log_sizes = args.Has("log-sizes");
  Say("STARTED pid=%d", getpid());
  std::vector<std::thread> workers;
  for (uint64_t i = 0; i < threads; ++i) {
    workers.emplace_back(CallerThread, std::ref(*client), service, static_cast<uint32_t>(i), calls,
                         depth, max_payload, seed, timeout, std::ref(totals));
  }
  for (auto& w : workers) w.join();
  std::string errors;
  for (const auto& [code, n] : totals.errors) {
    errors += (errors.empty() ? "" : ",") + ("\"" + code + "\":" + std::to_string(n));
  }
  uint64_t ok = totals.ok, failed = totals.failed, mismatch = totals.mismatch;
  Say("{\"ok\":%llu,\"failed\":%llu,\"mismatch\":%llu,\"bytes\":%llu,\"errors\":{%s}}",
      static_cast<unsigned long long>(ok), static_cast<unsigned long long>(failed),
      static_cast<unsigned long long>(mismatch),
      static_cast<unsigned long long>(totals.bytes.load()), errors.c_str());
  bool all = failed == 0 && mismatch == 0 && ok == threads * calls;
  client.reset();
  return all ? 0 : 1;
}

}  // namespace mcdma::itest

int main(int argc, char** argv) {
  using namespace mcdma::itest;
  return mcdma::harness::RoleMain(
      "mcdma_testapp",
      "serve|call|fill|write|verify-read|sustain|garbage|peer-load|peer-raw|peer-rogue|"
      "resilient-serve|"
      "resilient-load --socket S ...",
      {{"serve", RunServe},
       {"call", RunCall},
       {"fill", RunFill},
       {"write", RunWrite},
       {"verify-read", RunVerifyRead},
       {"sustain", RunSustain},
       {"garbage", RunGarbage},
       {"peer-load", RunPeerLoad},
       {"peer-raw", RunPeerRaw},
       {"peer-rogue", RunPeerRogue},
       {"resilient-serve", RunResilientServe},
       {"resilient-load", RunResilientLoad}},
      argc, argv);
}
