// mcdma-kv-handoff: the KV-cache hand-off from a C++ engine (mcdma/kv.hpp),
// speaking the same protocol as Python's mcdma.kv, so either end may be
// either language.
//
//   mcdma-kv-handoff produce --socket S --id ID --layers N --layer-bytes B --allow HOST
//       offers N layers (each B bytes, rounded up to whole pages by the
//       daemon) filled with the test pattern, publishes them one by one,
//       waits until one consumer has every layer
//   mcdma-kv-handoff consume --socket S --peer HOST --id ID
//       pulls hand-off ID from HOST and checks every byte against the pattern
//
// The pattern: layer L is 64-bit little-endian words, word i =
// i * 0x9E3779B97F4A7C15 + L (tests/python/test_kv.py writes the same).
// Prints one line per step; exits 0 only if everything held (the consumer:
// every byte equal), 1 otherwise, 2 for bad usage.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "mcdma/client.hpp"
#include "mcdma/kv.hpp"

namespace {

using std::chrono::milliseconds;

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;
constexpr const char* kPatternName = "mcdma-kv-handoff/1";

void Fill(const mcdma::Buffer& b, uint32_t layer) {
  auto* words = reinterpret_cast<uint64_t*>(b.data());
  for (uint64_t i = 0; i < b.size() / 8; ++i) words[i] = i * kGolden + layer;
}

// The first differing word, or -1.
int64_t FirstDifference(const mcdma::Buffer& b, uint64_t nbytes, uint32_t layer) {
  const auto* words = reinterpret_cast<const uint64_t*>(b.data());
  for (uint64_t i = 0; i < nbytes / 8; ++i) {
    if (words[i] != i * kGolden + layer) return static_cast<int64_t>(i);
  }
  return -1;
}

int Fail(const char* what, const mcdma::Status& st) {
  std::fprintf(stderr, "mcdma-kv-handoff: %s: %s\n", what, st.ToString().c_str());
  return 1;
}

struct Options {
  std::string socket;
  std::string id;
  std::string peer;
  std::vector<std::string> allow;
  uint32_t layers = 4;
  uint64_t layer_bytes = 1 << 20;
  int timeout_ms = 60000;
};

int Produce(mcdma::Client& client, const Options& o) {
  std::vector<mcdma::Buffer> layers;
  for (uint32_t i = 0; i < o.layers; ++i) {
    auto b = client.Alloc(o.layer_bytes);
    if (!b.ok()) return Fail("alloc", b.status());
    Fill(*b, i);
    layers.push_back(*b);
  }
  mcdma::kv::ExportOptions eo;
  eo.allowed_peers = o.allow;
  std::string manifest = std::string(R"({"dtype":"uint64","pattern":")") + kPatternName + R"("})";
  auto exp = mcdma::kv::Export::Create(client, o.id, layers, manifest, eo);
  if (!exp.ok()) return Fail("export", exp.status());
  std::printf("READY %s: %u layers of %llu bytes\n", o.id.c_str(), o.layers,
              static_cast<unsigned long long>(layers[0].size()));
  std::fflush(stdout);
  for (uint32_t i = 0; i < o.layers; ++i) {
    if (auto st = (*exp)->PublishLayer(i); !st.ok()) return Fail("publish", st);
    std::printf("published %u\n", i);
    std::fflush(stdout);
  }
  auto done = (*exp)->WaitConsumed(1, milliseconds(o.timeout_ms));
  if (!done.ok()) return Fail("wait_consumed", done.status());
  std::printf("CONSUMED by %s\n", done->front().c_str());
  (*exp)->Close();
  return 0;
}

int Consume(mcdma::Client& client, const Options& o) {
  mcdma::kv::BufferPool pool(client);
  mcdma::kv::ImportOptions io;
  io.expect_json = std::string(R"({"dtype":"uint64","pattern":")") + kPatternName + R"("})";
  io.deadline = milliseconds(o.timeout_ms);
  io.open_wait = milliseconds(o.timeout_ms);
  io.pool = &pool;
  auto imp = mcdma::kv::Import::Open(client, o.peer, o.id, io);
  if (!imp.ok()) return Fail("open", imp.status());
  std::printf("opened %s from %s: manifest %s\n", o.id.c_str(), o.peer.c_str(),
              (*imp)->manifest_json().c_str());
  auto st = (*imp)->Pull([](uint32_t layer) { std::printf("landed %u\n", layer); });
  if (!st.ok()) return Fail("pull", st);
  uint64_t total = 0;
  for (uint32_t i = 0; i < (*imp)->buffers().size(); ++i) {
    uint64_t n = (*imp)->layer_nbytes()[i];
    int64_t at = FirstDifference((*imp)->buffers()[i], n, i);
    if (at >= 0) {
      std::fprintf(stderr, "mcdma-kv-handoff: layer %u differs at word %lld\n", i,
                   static_cast<long long>(at));
      return 1;
    }
    total += n;
  }
  auto stats = (*imp)->stats();
  std::printf("VERIFIED %llu bytes in %zu layers (%.3f s from open)\n",
              static_cast<unsigned long long>(total), (*imp)->buffers().size(), stats.total_s);
  return 0;
}

int Main(int argc, char** argv) {
  CLI::App app{"The KV-cache hand-off from C++ (mcdma/kv.hpp)."};
  app.require_subcommand(1);
  Options o;
  auto* produce = app.add_subcommand("produce", "offer a hand-off of pattern-filled layers");
  auto* consume = app.add_subcommand("consume", "pull a hand-off and check every byte");
  for (auto* sub : {produce, consume}) {
    sub->add_option("--socket", o.socket, "the daemon's control socket");
    sub->add_option("--id", o.id, "the hand-off id")->required();
    sub->add_option("--timeout-ms", o.timeout_ms, "deadline of every wait")
        ->check(CLI::Range(1, 3600000));
  }
  produce->add_option("--layers", o.layers, "layers")->check(CLI::Range(1u, mcdma::kv::kMaxLayers));
  produce->add_option("--layer-bytes", o.layer_bytes, "bytes per layer")
      ->check(CLI::Range(uint64_t{8}, uint64_t{1} << 34));
  produce->add_option("--allow", o.allow, "hosts whose apps may pull it");
  consume->add_option("--peer", o.peer, "the producer's host (empty: this host)");
  CLI11_PARSE(app, argc, argv);

  mcdma::ClientOptions co;
  co.socket = o.socket;
  co.app_name = "mcdma-kv-handoff";
  auto client = mcdma::Client::Connect(co);
  if (!client.ok()) return Fail("connect", client.status());
  return produce->parsed() ? Produce(**client, o) : Consume(**client, o);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mcdma-kv-handoff: %s\n", e.what());
    return 1;
  }
}
