// Stress roles of mcdma_testapp:
//   sustain  calls and transfers in a loop until killed (or stdin EOF); the
//            kill -9 tests kill it, or kill what it talks to, mid-flight;
//   garbage  scribbles random bytes over its whole mailbox while it has a
//            call in flight, then reports how its later operations failed.
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "client_core.hpp"
#include "mcdma_internal/wait.hpp"
#include "pattern.hpp"
#include "testapp.hpp"

namespace mcdma::itest {
namespace {

[[noreturn]] void Fail(const std::string& what) {
  Say("FAIL %s", what.c_str());
  std::fprintf(stderr, "sustain: FAIL %s\n", what.c_str());
  _exit(1);
}

// Calls the echo service forever; any failure or wrong byte is fatal.
void SustainCalls(Client& client, const std::string& service, uint64_t seed,
                  std::atomic<bool>& stop) {
  const uint32_t pid = static_cast<uint32_t>(getpid());
  Progress progress("CALLS");
  std::vector<std::byte> req;
  for (uint64_t i = 0; !stop.load(); ++i) {
    MakeCallPayload(req, CallSize(seed, pid, 0, i, 16384), seed, pid, 0, i);
    auto r = client.Call(service, req, std::chrono::milliseconds(10000));
    if (!r.ok()) Fail("call " + std::to_string(i) + ": " + r.status().ToString());
    if (r->size() != req.size() ||
        (req.size() > 0 && std::memcmp(r->data(), req.data(), req.size()) != 0)) {
      Fail("call " + std::to_string(i) + ": reply differs from the request");
    }
    progress.Tick(i + 1);
  }
}

// Writes a fresh pattern into its own slot of the export, reads it back, and
// reads the exporter's slot 0; verifies every byte. Transfer errors (the
// exporter may be killed) are reported once per kind, then it resolves again.
void SustainTransfers(Client& client, const std::string& export_name, uint64_t slot,
                      uint64_t slot_bytes, uint64_t read_seed, uint64_t seed,
                      std::atomic<bool>& stop) {
  auto src = client.Alloc(slot_bytes);
  auto dst = client.Alloc(slot_bytes);
  if (!src.ok() || !dst.ok()) Fail("alloc: " + (src.ok() ? dst.status() : src.status()).ToString());
  Progress progress("XFERS");
  std::optional<RemoteBuffer> remote;
  std::string last_error;
  auto report = [&](const std::string& kind, const Status& st) {
    std::string line = kind + " " + CodeName(st.code());
    if (line != last_error) {
      Say("%s", line.c_str());
      std::fprintf(stderr, "sustain: %s: %s\n", kind.c_str(), st.ToString().c_str());
      last_error = line;
    }
  };
  const auto timeout = std::chrono::milliseconds(10000);
  uint64_t done = 0;
  for (uint64_t i = 0; !stop.load(); ++i) {
    if (!remote) {
      auto r = client.Resolve(export_name);
      if (!r.ok()) {
        report("RESOLVE_ERR", r.status());
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        continue;
      }
      remote = *r;
    }
    uint64_t s = Mix(seed ^ (slot << 40) ^ i);
    FillPattern(src->data(), slot_bytes, s);
    std::memset(dst->data(), 0, slot_bytes);
    Result<uint64_t> w = client.Write(*remote, slot * slot_bytes, *src, 0, slot_bytes, timeout);
    Result<uint64_t> rd =
        w.ok() ? client.Read(*remote, slot * slot_bytes, *dst, 0, slot_bytes, timeout) : w;
    if (w.ok() && rd.ok()) {
      if (*w != slot_bytes || *rd != slot_bytes) Fail("transfer moved a short count");
      VerifyResult v = VerifyPattern(dst->data(), slot_bytes, s);
      if (!v.ok) Fail("own slot read back wrong at " + std::to_string(v.first_bad));
      std::memset(dst->data(), 0, slot_bytes);
      rd = client.Read(*remote, 0, *dst, 0, slot_bytes, timeout);
      if (rd.ok()) {
        v = VerifyPattern(dst->data(), slot_bytes, read_seed);
        if (!v.ok) Fail("exporter's slot read wrong at " + std::to_string(v.first_bad));
      }
    }
    const Status& st = !w.ok() ? w.status() : rd.status();
    if (!st.ok()) {
      report(w.ok() ? "XFER_ERR read" : "XFER_ERR write", st);
      (void)client.Release(*remote);
      remote.reset();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    progress.Tick(++done);
  }
}

}  // namespace

int RunSustain(const Args& args) {
  auto client = ConnectOrDie(args, "sustain");
  std::string service = args.Need("service");
  std::string export_name = args.Need("export");
  uint64_t slot = args.U64("slot", 1);
  uint64_t slot_bytes = args.U64("slot-bytes", 1 << 20);
  uint64_t read_seed = args.U64("read-seed", 1);
  uint64_t seed = args.U64("seed", 7);
  // Something of its own for the daemon to reap: a buffer and an export.
  auto own = client->Alloc(64 << 10);
  if (!own.ok()) Fail("alloc own: " + own.status().ToString());
  if (args.Has("own-export")) {
    if (Status st = client->Export(*own, args.Str("own-export")); !st.ok())
      Fail("export own: " + st.ToString());
  }
  Say("READY session=%llu pid=%d", static_cast<unsigned long long>(client->info().session_id),
      getpid());
  std::atomic<bool> stop{false};
  std::thread calls(SustainCalls, std::ref(*client), service, seed, std::ref(stop));
  std::thread xfers(SustainTransfers, std::ref(*client), export_name, slot, slot_bytes, read_seed,
                    seed, std::ref(stop));
  WaitForStdinEof();
  stop.store(true);
  calls.join();
  xfers.join();
  Say("DONE");
  return 0;
}

// ---- garbage ----
namespace {
std::atomic<const char*> g_phase{"start"};

// Well-formed ring indices, random descriptors: each round publishes 1..32
// descriptors of random bytes, half of them with a real opcode and, often,
// real ids (its own buffer and remote handle, the echo service, small call
// ids that may belong to other sessions' pending calls) and in-range-ish
// offsets, so validation past the first check is exercised too. The arena
// is scribbled as well. The library beside it keeps publishing its own
// RELEASEs from its private tail: that collision is part of the chaos.
void ScribbleDescriptors(Client& client, const std::string& service, std::span<std::byte> mailbox,
                         std::mt19937_64& rng, uint64_t rounds) {
  auto* header = reinterpret_cast<shm::MailboxHeader*>(mailbox.data());
  const uint32_t entries = header->sq_entries;
  const uint64_t app = header->app_arena_bytes;
  const uint64_t arena_bytes = app + header->daemon_arena_bytes;
  auto* sq = reinterpret_cast<shm::SubmitDesc*>(mailbox.data() + header->sq_offset);
  std::byte* arena = mailbox.data() + header->arena_offset;
  auto own = client.Alloc(1 << 20);
  std::string name = "garbage-exp-" + std::to_string(getpid());
  ExportOptions eo;
  eo.allow_write = true;
  uint64_t handle = 0;
  if (own.ok() && client.Export(*own, name, eo).ok()) {
    if (auto r = client.Resolve(name); r.ok()) handle = r->handle;
  }
  auto sid = client.core()->ServiceId(service, /*refresh=*/false);
  const uint64_t echo_id = sid.ok() ? *sid : 0;
  auto maybe = [&](uint64_t real) { return rng() % 4 != 0 ? real : rng(); };
  for (uint64_t r = 0; r < rounds; ++r) {
    uint32_t head = header->sq_head.value.load(std::memory_order_acquire);
    uint32_t n = static_cast<uint32_t>(rng() % 32 + 1);
    for (uint32_t i = 0; i < n; ++i) {
      shm::SubmitDesc d;
      uint64_t words[8];
      for (auto& w : words) w = rng();
      std::memcpy(&d, words, sizeof(d));
      if (rng() % 2 == 0) {
        d.opcode = static_cast<uint8_t>(rng() % 8);
        d.payload_off = static_cast<uint32_t>(rng() % (arena_bytes + 4096)) & ~0xFFu;
        d.payload_len = static_cast<uint32_t>(rng() % 70000);
        d.local_buffer = maybe(own.ok() ? own->id() : 0);
        d.local_offset = rng() % (2 << 20);
        d.remote_offset = rng() % (2 << 20);
        d.length = rng() % 3 == 0 ? rng() : rng() % (1 << 20);
        if (d.opcode == static_cast<uint8_t>(shm::Op::kRead) ||
            d.opcode == static_cast<uint8_t>(shm::Op::kWrite)) {
          d.target = maybe(handle);
        } else if (d.opcode == static_cast<uint8_t>(shm::Op::kReply)) {
          d.target = rng() % 100000;  // possibly someone else's pending call
          d.status = static_cast<uint16_t>(rng() % 20);
        } else {
          d.target = maybe(echo_id);
        }
        d.timeout_us = static_cast<uint32_t>(rng() % 2000000);
      }
      std::memcpy(&sq[(head + i) & (entries - 1)], &d, sizeof(d));
    }
    header->sq_tail.value.store(head + n, std::memory_order_release);
    wait::Ring(header->daemon_bell, /*shared=*/true);
    for (int k = 0; k < 64; ++k) {
      uint64_t v = rng();
      std::memcpy(arena + (rng() % (arena_bytes / 8)) * 8, &v, 8);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}
}  // namespace

int RunGarbage(const Args& args) {
  const auto bound = std::chrono::seconds(args.U64("bound-s", 40));
  // Whatever happens below, this process ends within `bound`: a hang is
  // reported as such (exit 3) with the phase it hung in.
  std::thread([bound] {
    std::this_thread::sleep_for(bound);
    Say("HUNG phase=%s", g_phase.load());
    std::fflush(stdout);
    _exit(3);
  }).detach();

  ClientOptions o;
  o.default_timeout = std::chrono::milliseconds(2000);
  o.connect_timeout = std::chrono::milliseconds(5000);
  o.handler_threads = 1;
  o.arena_bytes = 256 << 10;  // a small mailbox: scribbling all of it is cheap
  auto client = ConnectOrDie(args, "garbage", o);
  std::string service = args.Need("service");
  std::string slow = service + "-garbage-slow";
  auto sid = client->Serve(slow, [](ServerCall& call) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    (void)call.Reply(call.payload());
  });
  if (!sid.ok()) {
    std::fprintf(stderr, "garbage: Serve: %s\n", sid.status().ToString().c_str());
    return 1;
  }
  Say("READY session=%llu pid=%d", static_cast<unsigned long long>(client->info().session_id),
      getpid());
  {
    // Wait for "go" (or EOF) so the test can line up the other clients first.
    char c;
    while (read(0, &c, 1) == 1 && c != '\n') {
    }
  }

  g_phase = "start-call";
  static const char kInFlight[] = "in flight while scribbling";
  Future<Message> inflight = client->CallAsync(
      slow, std::as_bytes(std::span<const char>(kInFlight, sizeof(kInFlight) - 1)),
      std::chrono::milliseconds(3000));

  g_phase = "scribble";
  std::span<std::byte> mailbox = client->core()->mailbox_for_testing();
  std::mt19937_64 rng(args.U64("seed", 99));
  const uint64_t rounds = args.U64("rounds", 300);
  const std::string mode = args.Str("mode", "mailbox");
  if (mode == "mailbox") {
    // Everything: header, indices, bells, all three rings, both arena halves.
    for (uint64_t r = 0; r < rounds; ++r) {
      for (size_t off = 0; off + 8 <= mailbox.size(); off += 8) {
        uint64_t v = rng();
        std::memcpy(mailbox.data() + off, &v, 8);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  } else if (mode == "descriptors") {
    ScribbleDescriptors(*client, service, mailbox, rng, rounds);
  } else {
    std::fprintf(stderr, "garbage: unknown --mode %s\n", mode.c_str());
    return 2;
  }
  Say("SCRIBBLED mode=%s rounds=%llu bytes=%zu", mode.c_str(),
      static_cast<unsigned long long>(rounds), mailbox.size());

  g_phase = "wait-inflight";
  Result<Message> first = inflight.Wait();
  std::string inflight_code = CodeName(first.status().code());

  g_phase = "calls-after";
  std::map<std::string, int> after;
  int errors = first.ok() ? 0 : 1;
  const int after_calls = static_cast<int>(args.U64("after-calls", 5));
  for (int i = 0; i < after_calls; ++i) {
    std::string req = "after scribbling " + std::to_string(i);
    auto r = client->Call(service, req, std::chrono::milliseconds(500));
    ++after[CodeName(r.status().code())];
    if (!r.ok()) ++errors;
  }
  g_phase = "alloc-after";
  auto b = client->Alloc(4096);
  if (!b.ok()) ++errors;
  std::string codes;
  for (const auto& [code, n] : after)
    codes += (codes.empty() ? "" : ",") + ("\"" + code + "\":" + std::to_string(n));
  Say("{\"inflight\":\"%s\",\"after\":{%s},\"alloc\":\"%s\",\"closed\":%d,\"errors\":%d}",
      inflight_code.c_str(), codes.c_str(), CodeName(b.status().code()),
      client->core()->closed() ? 1 : 0, errors);

  g_phase = "close";
  client.reset();
  Say("DONE");
  return 0;
}

}  // namespace mcdma::itest
