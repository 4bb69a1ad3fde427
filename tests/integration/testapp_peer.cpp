// Roles of mcdma_testapp that exercise links to peer hosts:
//   peer-load  calls a peer's service and writes/reads a peer's export until
//              stdin reaches EOF, and survives link failures the way a real
//              app would: every operation has a deadline, and after an error
//              it looks the service up / resolves the export again. The
//              test brackets the moment it breaks the link with stdin "mark"
//              (just before) and "broken" (just after); each failure is
//              classified against that window, so the test can tell
//              operations in flight when the link broke from those started
//              on a broken link. Stdin "status" reports how many operations
//              started before "broken" are still running.
//   peer-raw   talks to a peer daemon's Peer gRPC service directly, without a
//              ticket, with a forged one, and with a wrong Authenticate
//              proof; prints the gRPC code each call got.
#include <grpcpp/grpcpp.h>
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
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "client_core.hpp"
#include "mcdma/v1/peer.grpc.pb.h"
#include "pattern.hpp"
#include "rpc/rpc_status.hpp"
#include "testapp.hpp"

namespace mcdma::itest {
namespace {

using SteadyClock = std::chrono::steady_clock;

// Text safe inside a JSON string (diagnostics only: quotes and control
// characters become spaces).
std::string JsonSafe(const std::string& text) {
  std::string out = text;
  for (char& c : out) {
    if (c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20) c = ' ';
  }
  return out;
}

// Everything the load threads share. Threads: every worker thread, plus the
// main thread reading stdin; counters are atomics, the rest is under mu.
struct Load {
  std::chrono::milliseconds timeout{5000};
  std::atomic<bool> stop{false};
  // Steady-clock ns of the test's "mark" and "broken"; INT64_MAX until each
  // comes. [mark, broken] holds the moment the link broke.
  std::atomic<int64_t> mark_ns{INT64_MAX};
  std::atomic<int64_t> broken_ns{INT64_MAX};
  std::atomic<uint64_t> calls_ok{0};
  std::atomic<uint64_t> xfers_ok{0};
  std::atomic<uint64_t> mismatch{0};
  // Per worker thread: start (steady ns) of the operation it has in flight,
  // 0 when it has none.
  std::unique_ptr<std::atomic<int64_t>[]> current;

  std::mutex mu;
  // Failed operations by code: ended before the mark ("early": the link was
  // meant to be healthy), started before "broken" and ended after the mark
  // ("pre": in flight when the link broke), started after "broken" ("post":
  // started on a broken link).
  std::map<std::string, uint64_t> early, pre, post;  // GUARDED_BY(mu)
  std::map<std::string, uint64_t> lookup_errors;     // GUARDED_BY(mu)
  std::map<std::string, uint64_t> resolve_errors;    // GUARDED_BY(mu)
  int64_t max_elapsed_ms = 0;                        // GUARDED_BY(mu): slowest failed op
  int64_t max_overrun_ms = LLONG_MIN;                // GUARDED_BY(mu): elapsed - deadline, worst
  uint64_t early_timeouts = 0;                       // GUARDED_BY(mu): TIMEOUT before the deadline
  int64_t first_error_ms = -1;                       // GUARDED_BY(mu): first failure after the mark
  int64_t last_error_ms = -1;                        // GUARDED_BY(mu): last failure after the mark
  int printed = 0;                                   // GUARDED_BY(mu)
  // The first "early" failure whole (kind and status), so a test that
  // finds one can say where it came from.
  std::string first_early;  // GUARDED_BY(mu)
};

// Records one failed operation (`kind`: call, write, read).
void RecordFailure(Load& load, const char* kind, int64_t start_ns, int64_t end_ns,
                   const Status& st) {
  const int64_t mark = load.mark_ns.load();
  const int64_t broken = load.broken_ns.load();
  const int64_t elapsed_ms = (end_ns - start_ns) / 1000000;
  const int64_t deadline_ms = load.timeout.count();
  const std::string code = CodeName(st.code());
  std::lock_guard lock(load.mu);
  const char* cls = end_ns < mark ? "early" : (start_ns < broken ? "pre" : "post");
  if (end_ns < mark) {
    ++load.early[code];
    if (load.first_early.empty()) load.first_early = std::string(kind) + ": " + st.ToString();
  } else {
    (start_ns < broken ? load.pre : load.post)[code]++;
    int64_t since_mark = (end_ns - mark) / 1000000;
    if (load.first_error_ms < 0) load.first_error_ms = since_mark;
    load.last_error_ms = since_mark;
  }
  load.max_elapsed_ms = std::max(load.max_elapsed_ms, elapsed_ms);
  load.max_overrun_ms = std::max(load.max_overrun_ms, elapsed_ms - deadline_ms);
  if (st.code() == Code::kTimeout && elapsed_ms + 50 < deadline_ms) ++load.early_timeouts;
  if (load.printed++ < 30) {
    Say("ERR %s %s elapsed_ms=%lld class=%s", kind, code.c_str(),
        static_cast<long long>(elapsed_ms), cls);
    std::fprintf(stderr, "peer-load: %s (%s, %lld ms): %s\n", kind, cls,
                 static_cast<long long>(elapsed_ms), st.ToString().c_str());
  }
}

// Brackets one timed operation of worker `thread`: marks it in flight for
// "status" and returns its start.
int64_t Begin(Load& load, int thread) {
  int64_t start = NowNs();
  load.current[thread].store(start);
  return start;
}

void End(Load& load, int thread) { load.current[thread].store(0); }

void CallLoop(Client& client, Load& load, const std::string& service, int thread, uint64_t seed,
              uint64_t max_payload, Progress& progress) {
  const uint32_t pid = static_cast<uint32_t>(getpid());
  std::vector<std::byte> req;
  for (uint64_t i = 0; !load.stop.load(); ++i) {
    MakeCallPayload(req, CallSize(seed, pid, thread, i, max_payload), seed, pid, thread, i);
    // CallAsync uses the cached service id and never retries, so the time
    // measured is exactly one operation's, deadline included.
    int64_t start = Begin(load, thread);
    Result<Message> r = client.CallAsync(service, req, load.timeout).Wait();
    int64_t end = NowNs();
    End(load, thread);
    if (r.ok()) {
      if (r->size() != req.size() ||
          (!req.empty() && std::memcmp(r->data(), req.data(), req.size()) != 0)) {
        ++load.mismatch;
        Say("MISMATCH call thread=%d seq=%llu", thread, static_cast<unsigned long long>(i));
      } else {
        progress.Tick(++load.calls_ok);
      }
      continue;
    }
    RecordFailure(load, "call", start, end, r.status());
    // Look the service up again (its id changes when the peer restarts); not
    // timed: it is a control-plane request, not an operation with a deadline.
    while (!load.stop.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      auto id = client.core()->ServiceId(service, /*refresh=*/true);
      if (id.ok()) break;
      std::lock_guard lock(load.mu);
      ++load.lookup_errors[CodeName(id.status().code())];
    }
  }
}

void TransferLoop(Client& client, Load& load, const std::string& export_name,
                  const std::string& peer, int thread, uint64_t slot, uint64_t slot_bytes,
                  uint64_t read_seed, uint64_t seed, Progress& progress) {
  auto src = client.Alloc(slot_bytes);
  auto dst = client.Alloc(slot_bytes);
  if (!src.ok() || !dst.ok()) {
    Say("MISMATCH alloc failed");
    ++load.mismatch;
    return;
  }
  std::optional<RemoteBuffer> remote;
  // One timed transfer; false (and recorded) on failure.
  auto timed = [&](const char* kind, bool write, uint64_t remote_off, const Buffer& local) {
    int64_t start = Begin(load, thread);
    Result<uint64_t> r = write
                             ? client.Write(*remote, remote_off, local, 0, slot_bytes, load.timeout)
                             : client.Read(*remote, remote_off, local, 0, slot_bytes, load.timeout);
    int64_t end = NowNs();
    End(load, thread);
    if (!r.ok()) {
      RecordFailure(load, kind, start, end, r.status());
      return false;
    }
    if (*r != slot_bytes) {
      ++load.mismatch;
      Say("MISMATCH %s moved %llu of %llu bytes", kind, static_cast<unsigned long long>(*r),
          static_cast<unsigned long long>(slot_bytes));
      return false;
    }
    return true;
  };
  for (uint64_t i = 0; !load.stop.load(); ++i) {
    if (!remote) {
      auto r = client.Resolve(export_name, peer);
      if (!r.ok()) {
        {
          std::lock_guard lock(load.mu);
          ++load.resolve_errors[CodeName(r.status().code())];
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        continue;
      }
      remote = *r;
    }
    uint64_t s = Mix(seed ^ (slot << 40) ^ i);
    FillPattern(src->data(), slot_bytes, s);
    std::memset(dst->data(), 0, slot_bytes);
    bool ok = timed("write", true, slot * slot_bytes, *src) &&
              timed("read", false, slot * slot_bytes, *dst);
    if (ok && !VerifyPattern(dst->data(), slot_bytes, s).ok) {
      ++load.mismatch;
      Say("MISMATCH own slot read back wrong");
    }
    if (ok) {
      std::memset(dst->data(), 0, slot_bytes);
      ok = timed("read", false, 0, *dst);
      if (ok && !VerifyPattern(dst->data(), slot_bytes, read_seed).ok) {
        ++load.mismatch;
        Say("MISMATCH exporter's slot read wrong");
      }
    }
    if (!ok) {
      (void)client.Release(*remote);
      remote.reset();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    progress.Tick(++load.xfers_ok);
  }
}

}  // namespace

int RunPeerLoad(const Args& args) {
  ClientOptions o;
  o.handler_threads = 0;
  auto client = ConnectOrDie(args, "peer-load", o);
  const std::string service = args.Need("service");
  const std::string export_name = args.Str("export");
  const std::string peer = args.Str("peer");
  const int call_threads = static_cast<int>(args.U64("call-threads", 3));
  const int xfer_threads = export_name.empty() ? 0 : 1;
  const uint64_t seed = args.U64("seed", 7);
  Load load;
  load.timeout = std::chrono::milliseconds(args.U64("timeout-ms", 5000));
  load.current = std::make_unique<std::atomic<int64_t>[]>(call_threads + xfer_threads);
  for (int i = 0; i < call_threads + xfer_threads; ++i) load.current[i].store(0);
  Progress calls_progress("CALLS");
  Progress xfers_progress("XFERS");
  Say("READY session=%llu pid=%d", static_cast<unsigned long long>(client->info().session_id),
      getpid());
  std::vector<std::thread> workers;
  for (int t = 0; t < call_threads; ++t) {
    workers.emplace_back(CallLoop, std::ref(*client), std::ref(load), service, t, seed + t,
                         args.U64("max-payload", 65536), std::ref(calls_progress));
  }
  if (xfer_threads > 0) {
    workers.emplace_back(TransferLoop, std::ref(*client), std::ref(load), export_name, peer,
                         call_threads, args.U64("slot", 1), args.U64("slot-bytes", 1 << 20),
                         args.U64("read-seed", 11), seed, std::ref(xfers_progress));
  }
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
      for (int i = 0; i < call_threads + xfer_threads; ++i) {
        int64_t s = load.current[i].load();
        if (s != 0 && s < broken) ++pre_inflight;
      }
      Say("STATUS pre_inflight=%d calls_ok=%llu xfers_ok=%llu", pre_inflight,
          static_cast<unsigned long long>(load.calls_ok.load()),
          static_cast<unsigned long long>(load.xfers_ok.load()));
    }
  }
  load.stop.store(true);
  for (auto& w : workers) w.join();
  std::lock_guard lock(load.mu);
  Say("{\"calls_ok\":%llu,\"xfers_ok\":%llu,\"mismatch\":%llu,\"early\":{%s},\"pre\":{%s},"
      "\"post\":{%s},\"lookup_errors\":{%s},\"resolve_errors\":{%s},\"max_elapsed_ms\":%lld,"
      "\"max_overrun_ms\":%lld,\"early_timeouts\":%llu,\"first_error_ms\":%lld,"
      "\"last_error_ms\":%lld,\"first_early\":\"%s\"}",
      static_cast<unsigned long long>(load.calls_ok.load()),
      static_cast<unsigned long long>(load.xfers_ok.load()),
      static_cast<unsigned long long>(load.mismatch.load()), JsonCounts(load.early).c_str(),
      JsonCounts(load.pre).c_str(), JsonCounts(load.post).c_str(),
      JsonCounts(load.lookup_errors).c_str(), JsonCounts(load.resolve_errors).c_str(),
      static_cast<long long>(load.max_elapsed_ms),
      static_cast<long long>(load.max_overrun_ms == LLONG_MIN ? 0 : load.max_overrun_ms),
      static_cast<unsigned long long>(load.early_timeouts),
      static_cast<long long>(load.first_error_ms), static_cast<long long>(load.last_error_ms),
      JsonSafe(load.first_early).c_str());
  return 0;
}

// ---- peer-raw ----
namespace {

std::string RandomBytes(size_t n) {
  std::random_device rd;
  std::string out(n, '\0');
  for (auto& c : out) c = static_cast<char>(rd() & 0xff);
  return out;
}

}  // namespace

int RunPeerRaw(const Args& args) {
  const std::string address = args.Need("address");
  auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  if (!channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10))) {
    Say("{\"ok\":0,\"error\":\"cannot connect to %s\"}", JsonSafe(address).c_str());
    return 1;
  }
  auto stub = v1::Peer::NewStub(channel);
  std::string out;
  auto note = [&](const std::string& key, const grpc::Status& st) {
    std::fprintf(stderr, "peer-raw: %s: %s %s\n", key.c_str(),
                 rpc::GrpcCodeName(st.error_code()).c_str(), st.error_message().c_str());
    out += ",\"" + key + "\":\"" + rpc::GrpcCodeName(st.error_code()) + "\"";
  };
  // Every ticketed method, without a ticket and with a well-formed forged one.
  for (const std::string& ticket :
       {std::string(), std::string("0123456789abcdef0123456789abcdef")}) {
    const std::string suffix = ticket.empty() ? "" : "_forged";
    auto ctx = [&](grpc::ClientContext& c) {
      c.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
      if (!ticket.empty()) c.AddMetadata("mcdma-ticket", ticket);
    };
    {
      grpc::ClientContext c;
      ctx(c);
      v1::PeerHelloRequest req;
      req.add_protocol_versions(1);
      req.set_host_id(args.Str("host-id", "intruder"));
      req.set_instance_id("0123456789abcdef0123456789abcdef");
      v1::PeerHelloReply rep;
      note("hello" + suffix, stub->Hello(&c, req, &rep));
    }
    {
      grpc::ClientContext c;
      ctx(c);
      v1::PeerResolveExportRequest req;
      req.set_name(args.Str("export", "secret"));
      req.set_transport("tcp");
      v1::PeerResolveExportReply rep;
      note("resolve" + suffix, stub->ResolveExport(&c, req, &rep));
    }
    {
      grpc::ClientContext c;
      ctx(c);
      v1::PeerLookupServiceRequest req;
      req.set_service(args.Str("service", "echo"));
      v1::PeerLookupServiceReply rep;
      note("lookup" + suffix, stub->LookupService(&c, req, &rep));
    }
    {
      grpc::ClientContext c;
      ctx(c);
      v1::PeerConnectRequest req;
      req.set_transport("tcp");
      req.set_generation(1);
      v1::PeerConnectReply rep;
      note("connect" + suffix, stub->Connect(&c, req, &rep));
    }
    {
      grpc::ClientContext c;
      ctx(c);
      v1::PeerHeartbeatRequest req;
      req.set_generation(1);
      v1::PeerHeartbeatReply rep;
      note("heartbeat" + suffix, stub->Heartbeat(&c, req, &rep));
    }
  }
  // Authenticate with a proof made without the key: the responder must end
  // the stream UNAUTHENTICATED and hand out no ticket.
  grpc::ClientContext c;
  c.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  auto stream = stub->Authenticate(&c);
  v1::AuthRequest hello;
  hello.mutable_hello()->set_version(1);
  hello.mutable_hello()->set_host_id(args.Str("host-id", "intruder"));
  hello.mutable_hello()->set_nonce(RandomBytes(32));
  v1::AuthResponse resp;
  std::string challenge_host;
  bool ticket = false;
  if (stream->Write(hello) && stream->Read(&resp) && resp.has_challenge()) {
    challenge_host = resp.challenge().host_id();
    v1::AuthRequest proof;
    proof.mutable_proof()->set_proof(RandomBytes(32));
    if (stream->Write(proof)) {
      stream->WritesDone();
      while (stream->Read(&resp)) ticket = ticket || resp.has_ticket();
    }
  }
  grpc::Status st = stream->Finish();
  note("auth", st);
  Say("{\"ok\":1%s,\"auth_message\":\"%s\",\"challenge_host\":\"%s\",\"ticket\":%d}", out.c_str(),
      JsonSafe(st.error_message()).c_str(), JsonSafe(challenge_host).c_str(), ticket ? 1 : 0);
  return 0;
}

}  // namespace mcdma::itest
