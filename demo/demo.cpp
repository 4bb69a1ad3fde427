// mcdma-demo: two apps exchanging calls and bulk data through mcdma-rpcd.
//
//   mcdma-demo serve  --socket S   # app A: serves "demo.echo" and
//                                  # "demo.digest", exports a 64 MiB buffer
//   mcdma-demo client --socket S   # app B: calls A, writes into A's buffer,
//                                  # reads it back, asks A to check it
//
// Every step prints what it did; the client exits non-zero if any byte
// differs. run-local-demo.sh starts a daemon and both apps.
#include <openssl/evp.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "mcdma/client.hpp"

namespace {

constexpr uint64_t kBufferBytes = 64ull << 20;
constexpr const char* kExport = "demo.buffer";

std::string Sha256Hex(const std::byte* data, size_t n) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data, n, md, &len, EVP_sha256(), nullptr);
  std::string out;
  char hex[3];
  for (unsigned i = 0; i < len; ++i) {
    std::snprintf(hex, sizeof(hex), "%02x", md[i]);
    out += hex;
  }
  return out;
}

void Fill(std::byte* p, size_t n, uint64_t seed) {
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (size_t i = 0; i + 8 <= n; i += 8) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    std::memcpy(p + i, &x, 8);
  }
}

double Ms(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

int Serve(const mcdma::ClientOptions& opts, const std::vector<std::string>& allow_peers) {
  auto client = mcdma::Client::Connect(opts);
  if (!client.ok()) {
    std::cerr << "serve: " << client.status().ToString() << "\n";
    return 1;
  }
  auto& c = *client;
  auto buffer = c->Alloc(kBufferBytes);
  if (!buffer.ok()) {
    std::cerr << "serve: alloc: " << buffer.status().ToString() << "\n";
    return 1;
  }
  mcdma::Buffer buf = *buffer;
  auto echo = c->Serve("demo.echo", [](mcdma::ServerCall& call) {
    std::string reply = "A heard: " + std::string(call.view());
    (void)call.Reply(reply);
  });
  // The digest service proves A sees, in its own mapping, the bytes B wrote.
  auto digest = c->Serve("demo.digest", [buf](mcdma::ServerCall& call) {
    (void)call.Reply(Sha256Hex(buf.data(), buf.size()));
  });
  mcdma::ExportOptions eo;
  eo.allow_read = true;
  eo.allow_write = true;
  eo.allowed_peers = allow_peers;  // hosts whose apps may resolve it across a link
  mcdma::Status st = c->Export(buf, kExport, eo);
  if (!echo.ok() || !digest.ok() || !st.ok()) {
    std::cerr << "serve: setup failed\n";
    return 1;
  }
  std::printf("[app A] session %lu: serving demo.echo and demo.digest, exported %s (%lu MiB)\n",
              static_cast<unsigned long>(c->info().session_id), kExport,
              static_cast<unsigned long>(buf.size() >> 20));
  std::printf("READY\n");
  std::fflush(stdout);
  // Serve until stdin closes (the demo script holds it open).
  char ch;
  while (read(0, &ch, 1) > 0) {
  }
  return 0;
}

int RunClient(const mcdma::ClientOptions& opts, const std::string& peer) {
  // With --peer, app A runs on another host: its services are "peer/name"
  // and its export is resolved on that peer, through both daemons.
  const std::string echo_svc = peer.empty() ? "demo.echo" : peer + "/demo.echo";
  const std::string digest_svc = peer.empty() ? "demo.digest" : peer + "/demo.digest";
  auto client = mcdma::Client::Connect(opts);
  if (!client.ok()) {
    std::cerr << "client: " << client.status().ToString() << "\n";
    return 1;
  }
  auto& c = *client;
  std::printf("[app B] session %lu on host '%s' (daemon %s)\n",
              static_cast<unsigned long>(c->info().session_id), c->info().host_id.c_str(),
              c->info().daemon_version.c_str());

  // 1. Request/reply.
  auto t0 = std::chrono::steady_clock::now();
  auto reply = c->Call(echo_svc, std::string_view("hello from B"));
  if (!reply.ok()) {
    std::cerr << "call: " << reply.status().ToString() << "\n";
    return 1;
  }
  std::printf("[app B] call %s(\"hello from B\") -> \"%.*s\" in %.3f ms\n", echo_svc.c_str(),
              static_cast<int>(reply->size()), reinterpret_cast<const char*>(reply->data()),
              Ms(std::chrono::steady_clock::now() - t0));
  constexpr int kCalls = 10000;
  t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kCalls; ++i) {
    std::string req = "ping " + std::to_string(i);
    auto r = c->Call(echo_svc, req);
    if (!r.ok() || r->view() != "A heard: " + req) {
      std::cerr << "call " << i << " failed or mismatched\n";
      return 1;
    }
  }
  std::printf("[app B] %d more calls, every reply checked: %.2f us per round trip\n", kCalls,
              Ms(std::chrono::steady_clock::now() - t0) * 1000.0 / kCalls);

  // 2. Bulk: write a pattern into A's export, read it back, compare digests.
  auto remote = c->Resolve(kExport, peer);
  auto local = c->Alloc(kBufferBytes);
  auto back = c->Alloc(kBufferBytes);
  if (!remote.ok() || !local.ok() || !back.ok()) {
    std::cerr << "bulk setup failed: " << remote.status().ToString() << " "
              << local.status().ToString() << "\n";
    return 1;
  }
  Fill(local->data(), local->size(), 42);
  std::string want = Sha256Hex(local->data(), local->size());
  t0 = std::chrono::steady_clock::now();
  auto w = c->Write(*remote, 0, *local, 0, kBufferBytes);
  double write_ms = Ms(std::chrono::steady_clock::now() - t0);
  t0 = std::chrono::steady_clock::now();
  auto r = c->Read(*remote, 0, *back, 0, kBufferBytes);
  double read_ms = Ms(std::chrono::steady_clock::now() - t0);
  if (!w.ok() || !r.ok()) {
    std::cerr << "transfer failed: " << w.status().ToString() << " / " << r.status().ToString()
              << "\n";
    return 1;
  }
  std::printf(
      "[app B] wrote %lu MiB into A's buffer in %.1f ms (%.2f GB/s), read it back in %.1f ms (%.2f "
      "GB/s)\n",
      static_cast<unsigned long>(*w >> 20), write_ms, *w / write_ms / 1e6, read_ms,
      *r / read_ms / 1e6);
  bool same = std::memcmp(local->data(), back->data(), kBufferBytes) == 0;
  auto theirs = c->Call(digest_svc, std::string_view());
  std::string got = theirs.ok() ? std::string(theirs->view()) : theirs.status().ToString();
  std::printf("[app B] sha256 sent     %s\n[app B] sha256 read    %s\n[app B] sha256 at A    %s\n",
              want.c_str(), Sha256Hex(back->data(), back->size()).c_str(), got.c_str());
  // 3. A refused access: reading past the export's end is a named error.
  auto past = c->Read(*remote, 1, *back, 0, kBufferBytes);
  std::printf("[app B] read past the end of the export -> %s\n", past.status().ToString().c_str());
  if (!same || got != want || past.ok()) {
    std::printf("[app B] VERIFICATION FAILED\n");
    return 1;
  }
  std::printf("[app B] all bytes verified\n");
  return 0;
}

}  // namespace

static int Main(int argc, char** argv) {
  CLI::App app{"mcdma-demo: two apps talking through mcdma-rpcd"};
  app.option_defaults()->always_capture_default();
  mcdma::ClientOptions opts;
  app.add_option("--socket", opts.socket,
                 "daemon control socket (default: $MCDMA_SOCKET or the standard path)");
  app.require_subcommand(1);
  app.fallthrough();
  auto* serve = app.add_subcommand("serve", "app A: serve and export a buffer");
  std::vector<std::string> allow_peers;
  serve->add_option("--allow-peer", allow_peers,
                    "a host whose apps may resolve the export over a link (repeatable)");
  auto* client = app.add_subcommand("client", "app B: call A, write and read A's buffer, verify");
  std::string peer;
  client->add_option("--peer", peer, "A's host id when A runs on another host");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (serve->parsed()) {
    opts.app_name = "demo-A";
    return Serve(opts, allow_peers);
  }
  opts.app_name = "demo-B";
  (void)client;
  return RunClient(opts, peer);
}

int main(int argc, char** argv) {
  try {
    return Main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mcdma-demo: fatal: %s\n", e.what());
    return 1;
  }
}
