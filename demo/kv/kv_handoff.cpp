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
// i * 0x9E3779B97F4A7C15 + L (pattern_handoff.hpp; tests/python/test_kv.py
// writes the same). Prints one line per step; exits 0 only if everything
// held (the consumer: every byte equal), 1 otherwise, 2 for bad usage.
#include <cstdio>
#include <vector>

#include "pattern_handoff.hpp"

namespace {

using mcdma::demo::Fail;
using mcdma::demo::HandoffOptions;
using mcdma::demo::kGolden;

constexpr const char* kTool = "mcdma-kv-handoff";

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

int Produce(mcdma::Client& client, const HandoffOptions& o) {
  std::vector<mcdma::Buffer> layers;
  for (uint32_t i = 0; i < o.layers; ++i) {
    auto b = client.Alloc(o.layer_bytes);
    if (!b.ok()) return Fail(kTool, "alloc", b.status());
    Fill(*b, i);
    layers.push_back(*b);
  }
  return mcdma::demo::OfferAndPublish(kTool, client, o, layers);
}

int Consume(mcdma::Client& client, const HandoffOptions& o) {
  mcdma::kv::BufferPool pool(client);
  auto imp = mcdma::demo::OpenAndPull(client, o, pool);
  if (!imp.ok()) return Fail(kTool, "pull", imp.status());
  uint64_t total = 0;
  for (uint32_t i = 0; i < (*imp)->buffers().size(); ++i) {
    uint64_t n = (*imp)->layer_nbytes()[i];
    int64_t at = FirstDifference((*imp)->buffers()[i], n, i);
    if (at >= 0) {
      std::fprintf(stderr, "%s: layer %u differs at word %lld\n", kTool, i,
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
  HandoffOptions o;
  auto commands = mcdma::demo::AddHandoffCommands(app, o);
  CLI11_PARSE(app, argc, argv);
  return mcdma::demo::RunHandoffCommand(kTool, commands, o, Produce, Consume);
}

}  // namespace

int main(int argc, char** argv) { return mcdma::demo::GuardedMain(kTool, Main, argc, argv); }
