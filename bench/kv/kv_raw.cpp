// mcdma_bench_kv_raw: the C++ baseline of bench/kv/kv_bench.py. The same
// bytes as a KV hand-off of `--layers` x `--layer-bytes`, moved by libmcdma
// directly: no manifest, no notifications, no checksums.
//
//   serve (host A): allocates one buffer per layer, fills layer i with the
//     bulk pattern of round i (bench/link/net_roles.cpp's FillBulkPattern, which
//     kv_bench.py reproduces in numpy), exports it as "<prefix>.<i>"
//     (readable by --peer), prints "ready" and keeps the exports until its
//     stdin closes (or --run-limit passes).
//   read (host B): allocates and touches one local buffer per layer,
//     prints "ready", then runs one round per stdin line: "batch" (one
//     ReadBatch of every layer, a piece per layer), "each" (one Read per
//     layer, in order) or "fresh" (one ReadBatch into buffers allocated in
//     the round, as KVImport does by default: their first touch is timed).
//     A round zeroes the local buffers, then times Resolve of every layer
//     (+ Alloc for "fresh") + the reads, releases the handles and checks
//     every byte against the pattern, outside the clock. It answers one
//     JSON line: {"ok":true,"seconds":S,"bytes":N} or
//     {"ok":false,"error":"..."}. EOF on stdin ends it.
//
// Exit codes: 0 ok, 1 failure (reason on stderr), 2 usage. Threading: one
// thread (plus the Client's own).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "harness/daemon_echo.hpp"
#include "harness/endpoint.hpp"
#include "link_roles.hpp"
#include "mcdma/client.hpp"

namespace {

using mcdma::harness::Clock;

// The exports can lag the link by a heartbeat; the first Resolve retries.
constexpr auto kFirstResolveRetry = std::chrono::seconds(30);

struct Options {
  std::string socket;            // the daemon's control socket
  std::string peer;              // serve: host allowed to read; read: host to read from
  std::string prefix = "kvraw";  // export names: "<prefix>.<layer>"
  uint32_t layers = 32;
  uint64_t layer_bytes = 32ull << 20;
  int timeout_ms = 120000;  // deadline of one round's reads
  int run_limit_s = 900;    // the longest the server keeps its exports
};

std::string ExportName(const Options& o, uint32_t layer) {
  return o.prefix + "." + std::to_string(layer);
}

int Fail(const char* role, const mcdma::Status& st) {
  fprintf(stderr, "mcdma_bench_kv_raw %s: %s\n", role, st.ToString().c_str());
  return 1;
}

mcdma::Result<std::unique_ptr<mcdma::Client>> Connect(const Options& o, const char* app) {
  return mcdma::harness::ConnectWithRetry(o.socket, app);
}

int Serve(const Options& o) {
  auto client = Connect(o, "mcdma_bench_kv_raw-serve");
  if (!client.ok()) return Fail("serve", client.status());
  std::vector<mcdma::Buffer> layers;  // exports hold no reference: keep them here
  for (uint32_t i = 0; i < o.layers; ++i) {
    auto buffer = (*client)->Alloc(o.layer_bytes);
    if (!buffer.ok()) return Fail("serve", buffer.status());
    mcdma::bench::FillBulkPattern({buffer->data(), o.layer_bytes}, i);
    mcdma::ExportOptions options;
    options.allowed_peers = {o.peer};
    mcdma::Status st = (*client)->Export(*buffer, ExportName(o, i), options);
    if (!st.ok()) return Fail("serve", st);
    layers.push_back(std::move(*buffer));
  }
  printf("ready\n");
  fflush(stdout);
  mcdma::harness::WaitForLifeline(STDIN_FILENO, std::chrono::seconds(o.run_limit_s));
  return 0;
}

std::string JsonEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += (c == '\n' || c == '\t') ? ' ' : c;
  }
  return out;
}

class Reader {
 public:
  Reader(const Options& o, mcdma::Client& c) : o_(o), c_(c) {}

  mcdma::Status Init() {
    for (uint32_t i = 0; i < o_.layers; ++i) {
      MCDMA_ASSIGN_OR_RETURN(mcdma::Buffer buffer, c_.Alloc(o_.layer_bytes));
      std::memset(buffer.data(), 0, o_.layer_bytes);  // fault every page in, untimed
      local_.push_back(std::move(buffer));
    }
    auto deadline = Clock::now() + kFirstResolveRetry;
    for (;;) {
      auto probe = c_.Resolve(ExportName(o_, o_.layers - 1), o_.peer);
      if (probe.ok()) return c_.Release(*probe);
      if (Clock::now() >= deadline) return probe.status();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }

  // One timed round: Resolve every layer and read it (`batch`: one
  // ReadBatch; else one Read per layer), into the buffers made at Init or,
  // with `fresh`, into new ones allocated in the round (freed after it).
  // Returns seconds.
  mcdma::Result<double> Round(bool batch, bool fresh) {
    std::vector<mcdma::Buffer> round_buffers;
    if (!fresh) {
      for (auto& b : local_) std::memset(b.data(), 0, o_.layer_bytes);
    }
    std::vector<mcdma::Buffer>& local = fresh ? round_buffers : local_;
    const auto timeout = std::chrono::milliseconds(o_.timeout_ms);
    std::vector<mcdma::RemoteBuffer> remote(o_.layers);
    auto t0 = Clock::now();
    for (uint32_t i = 0; fresh && i < o_.layers; ++i) {
      MCDMA_ASSIGN_OR_RETURN(mcdma::Buffer buffer, c_.Alloc(o_.layer_bytes));
      round_buffers.push_back(std::move(buffer));
    }
    for (uint32_t i = 0; i < o_.layers; ++i) {
      MCDMA_ASSIGN_OR_RETURN(remote[i], c_.Resolve(ExportName(o_, i), o_.peer));
    }
    uint64_t moved = 0;
    if (batch) {
      std::vector<mcdma::Transfer> pieces;
      pieces.reserve(o_.layers);
      for (uint32_t i = 0; i < o_.layers; ++i)
        pieces.push_back({&local[i], 0, &remote[i], 0, o_.layer_bytes});
      MCDMA_ASSIGN_OR_RETURN(moved, c_.ReadBatch(pieces, timeout));
    } else {
      for (uint32_t i = 0; i < o_.layers; ++i) {
        MCDMA_ASSIGN_OR_RETURN(uint64_t n,
                               c_.Read(remote[i], 0, local[i], 0, o_.layer_bytes, timeout));
        moved += n;
      }
    }
    double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    for (const auto& r : remote) (void)c_.Release(r);
    if (moved != uint64_t{o_.layers} * o_.layer_bytes) {
      return mcdma::Status(mcdma::Code::kInternal, "moved " + std::to_string(moved) + " B of " +
                                                       std::to_string(o_.layers * o_.layer_bytes));
    }
    for (uint32_t i = 0; i < o_.layers; ++i) {
      mcdma::Status st = mcdma::bench::CheckBulkPattern({local[i].data(), o_.layer_bytes}, i);
      if (!st.ok()) {
        return mcdma::Status(st.code(), "layer " + std::to_string(i) + ": " + st.message());
      }
    }
    return seconds;
  }

 private:
  const Options& o_;
  mcdma::Client& c_;
  std::vector<mcdma::Buffer> local_;
};

int Read(const Options& o) {
  auto client = Connect(o, "mcdma_bench_kv_raw-read");
  if (!client.ok()) return Fail("read", client.status());
  Reader reader(o, **client);
  if (mcdma::Status st = reader.Init(); !st.ok()) return Fail("read", st);
  printf("ready\n");
  fflush(stdout);
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line != "batch" && line != "each" && line != "fresh")
      return Fail("read", mcdma::Status(mcdma::Code::kInvalid, "bad command " + line));
    auto seconds = reader.Round(line != "each", line == "fresh");
    if (seconds.ok()) {
      const unsigned long long total = o.layers * o.layer_bytes;
      printf("{\"ok\":true,\"seconds\":%.9f,\"bytes\":%llu}\n", *seconds, total);
    } else {
      printf("{\"ok\":false,\"error\":\"%s\"}\n", JsonEscape(seconds.status().ToString()).c_str());
    }
    fflush(stdout);
  }
  return 0;
}

int Main(int argc, char** argv) {
  CLI::App app{"The C++ baseline of bench/kv/kv_bench.py: per-layer exports read with libmcdma"};
  app.option_defaults()->always_capture_default();
  app.require_subcommand(1);
  Options o;
  auto common = [&o](CLI::App* sub) {
    sub->add_option("--socket", o.socket, "The daemon's control socket")->required();
    sub->add_option("--peer", o.peer, "serve: host that may read; read: host to read from")
        ->required();
    sub->add_option("--layers", o.layers, "Layers (one buffer each)")->check(CLI::Range(1, 4096));
    sub->add_option("--layer-bytes", o.layer_bytes, "Bytes per layer (a multiple of 8)")
        ->check(CLI::Range(uint64_t{8}, uint64_t{16} << 30));
    sub->add_option("--prefix", o.prefix, "Export names: PREFIX.<layer>");
  };
  CLI::App* serve = app.add_subcommand("serve", "Export the layers (host A)");
  common(serve);
  serve->add_option("--run-limit", o.run_limit_s, "Seconds to keep the exports at most");
  CLI::App* read = app.add_subcommand("read", "Read them, one round per stdin line (host B)");
  common(read);
  read->add_option("--timeout-ms", o.timeout_ms, "Deadline of one round's reads");
  if (std::optional<int> done = mcdma::harness::ParseCommandLine(app, argc, argv)) return *done;
  if (o.layer_bytes % 8 != 0) {
    fprintf(stderr, "mcdma_bench_kv_raw: --layer-bytes must be a multiple of 8\n");
    return 2;
  }
  return serve->parsed() ? Serve(o) : Read(o);
}

}  // namespace

int main(int argc, char** argv) {
  return mcdma::harness::GuardedMain("mcdma_bench_kv_raw", Main, argc, argv);
}
