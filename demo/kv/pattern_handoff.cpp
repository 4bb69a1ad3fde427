// See pattern_handoff.hpp.
#include "pattern_handoff.hpp"

#include <chrono>
#include <cstdio>
#include <exception>

namespace mcdma::demo {
namespace {

using std::chrono::milliseconds;

const std::string& PatternManifest() {
  static const std::string kManifest = R"({"dtype":"uint64","pattern":"mcdma-kv-handoff/1"})";
  return kManifest;
}

}  // namespace

HandoffCommands AddHandoffCommands(CLI::App& app, HandoffOptions& o) {
  app.require_subcommand(1);
  HandoffCommands c{app.add_subcommand("produce", "offer a hand-off of pattern-filled layers"),
                    app.add_subcommand("consume", "pull a hand-off and check every byte")};
  for (auto* sub : {c.produce, c.consume}) {
    sub->add_option("--socket", o.socket, "the daemon's control socket");
    sub->add_option("--id", o.id, "the hand-off id")->required();
    sub->add_option("--timeout-ms", o.timeout_ms, "deadline of every wait")
        ->check(CLI::Range(1, 3600000));
  }
  c.produce->add_option("--layers", o.layers, "layers")->check(CLI::Range(1u, kv::kMaxLayers));
  c.produce->add_option("--layer-bytes", o.layer_bytes, "bytes per layer")
      ->check(CLI::Range(uint64_t{8}, uint64_t{1} << 34));
  c.produce->add_option("--allow", o.allow, "hosts whose apps may pull it");
  c.produce->add_flag("--checksum", o.checksum,
                      "publish each layer's XXH3-64 (the consumer checks it)");
  c.consume->add_option("--peer", o.peer, "the producer's host (empty: this host)");
  return c;
}

int Fail(const char* tool, const char* what, const Status& st) {
  std::fprintf(stderr, "%s: %s: %s\n", tool, what, st.ToString().c_str());
  return 1;
}

int OfferAndPublish(const char* tool, Client& client, const HandoffOptions& o,
                    const std::vector<Buffer>& layers) {
  kv::ExportOptions eo;
  eo.allowed_peers = o.allow;
  eo.checksum = o.checksum;
  auto exp = kv::Export::Create(client, o.id, layers, PatternManifest(), eo);
  if (!exp.ok()) return Fail(tool, "export", exp.status());
  std::printf("READY %s: %zu layers of %llu bytes\n", o.id.c_str(), layers.size(),
              static_cast<unsigned long long>(layers.front().size()));
  std::fflush(stdout);
  for (uint32_t i = 0; i < layers.size(); ++i) {
    if (auto st = (*exp)->PublishLayer(i); !st.ok()) return Fail(tool, "publish", st);
    std::printf("published %u\n", i);
    std::fflush(stdout);
  }
  auto done = (*exp)->WaitConsumed(1, milliseconds(o.timeout_ms));
  if (!done.ok()) return Fail(tool, "wait_consumed", done.status());
  std::printf("CONSUMED by %s\n", done->front().c_str());
  (*exp)->Close();
  return 0;
}

Result<std::unique_ptr<kv::Import>> OpenAndPull(Client& client, const HandoffOptions& o,
                                                kv::BufferPool& pool) {
  kv::ImportOptions io;
  io.expect_json = PatternManifest();
  io.deadline = milliseconds(o.timeout_ms);
  io.open_wait = milliseconds(o.timeout_ms);
  io.pool = &pool;
  auto imp = kv::Import::Open(client, o.peer, o.id, io);
  if (!imp.ok()) return imp.status();
  std::printf("opened %s from %s: manifest %s\n", o.id.c_str(), o.peer.c_str(),
              (*imp)->manifest_json().c_str());
  auto st = (*imp)->Pull([](uint32_t layer) { std::printf("landed %u\n", layer); });
  if (!st.ok()) return st;
  return imp;
}

int RunHandoffCommand(const char* tool, const HandoffCommands& commands, const HandoffOptions& o,
                      int (*produce)(Client&, const HandoffOptions&),
                      int (*consume)(Client&, const HandoffOptions&)) {
  ClientOptions co;
  co.socket = o.socket;
  co.app_name = tool;
  auto client = Client::Connect(co);
  if (!client.ok()) return Fail(tool, "connect", client.status());
  return commands.produce->parsed() ? produce(**client, o) : consume(**client, o);
}

int GuardedMain(const char* tool, int (*main_fn)(int, char**), int argc, char** argv) {
  try {
    return main_fn(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", tool, e.what());
    return 1;
  }
}

}  // namespace mcdma::demo
