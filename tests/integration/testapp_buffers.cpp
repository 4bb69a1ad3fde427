// Bulk-buffer roles of mcdma_testapp:
//   fill        alloc + (optionally) fill a buffer with a pattern + export it
//               read/write; READY; then serves stdin commands "verify SEED"
//               (checks its own memory) until stdin reaches EOF;
//   write       resolve an export, write a pattern into all of it;
//   verify-read resolve an export, read all of it back and verify the pattern.
// Across hosts: fill --allowed-peers HOST[,HOST...] grants the export to peer
// hosts; write/verify-read --peer HOST resolve it on that peer.
// Transfers are split into --pieces batch pieces, submitted in reverse order so
// that the daemon's offset handling is exercised, not just a linear copy.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "pattern.hpp"
#include "testapp.hpp"

namespace mcdma::itest {
namespace {

std::vector<Transfer> Pieces(const Buffer& local, const RemoteBuffer& remote, uint64_t length,
                             uint64_t pieces) {
  pieces = std::max<uint64_t>(1, std::min(pieces, length));
  uint64_t each = (length + pieces - 1) / pieces;
  std::vector<Transfer> out;
  for (uint64_t off = 0; off < length; off += each) {
    out.push_back(Transfer{&local, off, &remote, off, std::min(each, length - off)});
  }
  std::reverse(out.begin(), out.end());
  return out;
}

}  // namespace

int RunFill(const Args& args) {
  auto client = ConnectOrDie(args, "fill");
  std::string name = args.Need("export");
  uint64_t size = args.U64("size", 1 << 20);
  uint64_t seed = args.U64("seed", 1);
  auto buf = client->Alloc(size);
  if (!buf.ok()) {
    std::fprintf(stderr, "fill: Alloc(%llu): %s\n", static_cast<unsigned long long>(size),
                 buf.status().ToString().c_str());
    return 1;
  }
  if (!args.Has("no-fill")) FillPattern(buf->data(), buf->size(), seed);
  ExportOptions eo;
  eo.allow_read = true;
  eo.allow_write = true;
  eo.allowed_peers = SplitList(args.Str("allowed-peers"));
  if (Status st = client->Export(*buf, name, eo); !st.ok()) {
    std::fprintf(stderr, "fill: Export(%s): %s\n", name.c_str(), st.ToString().c_str());
    return 1;
  }
  Say("READY session=%llu pid=%d buffer=%llu size=%llu",
      static_cast<unsigned long long>(client->info().session_id), getpid(),
      static_cast<unsigned long long>(buf->id()), static_cast<unsigned long long>(buf->size()));
  std::string line;
  while (std::getline(std::cin, line)) {
    unsigned long long s = 0;
    if (std::sscanf(line.c_str(), "verify %llu", &s) == 1) {
      VerifyResult r = VerifyPattern(buf->data(), size, s);
      if (r.ok) {
        Say("VERIFY ok bytes=%llu", static_cast<unsigned long long>(size));
      } else {
        Say("VERIFY bad first=%llu bad_bytes=%llu", static_cast<unsigned long long>(r.first_bad),
            static_cast<unsigned long long>(r.bad_bytes));
      }
    } else {
      Say("ERROR unknown command '%s'", line.c_str());
    }
  }
  return 0;
}

int RunWrite(const Args& args) {
  const char* role = "write";
  auto client = ConnectOrDie(args, role);
  std::string name = args.Need("export");
  uint64_t seed = args.U64("seed", 1);
  auto timeout = std::chrono::milliseconds(args.U64("timeout-ms", 120000));
  auto remote = client->Resolve(name, args.Str("peer"));
  if (!remote.ok()) {
    std::fprintf(stderr, "%s: resolve: %s\n", role, remote.status().ToString().c_str());
    Say("{\"ok\":0,\"error\":\"resolve: %s\"}", CodeName(remote.status().code()));
    return 1;
  }
  uint64_t length = args.U64("size", remote->length);
  auto local = client->Alloc(length);
  if (!local.ok()) {
    Say("{\"ok\":0,\"error\":\"alloc: %s\"}", CodeName(local.status().code()));
    return 1;
  }
  FillPattern(local->data(), length, seed);
  auto pieces = Pieces(*local, *remote, length, args.U64("pieces", 4));
  auto start = std::chrono::steady_clock::now();
  auto moved = client->WriteBatch(pieces, timeout);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                  start);
  if (!moved.ok()) {
    std::fprintf(stderr, "write: %s\n", moved.status().ToString().c_str());
    Say("{\"ok\":0,\"error\":\"%s\"}", CodeName(moved.status().code()));
    return 1;
  }
  Say("{\"ok\":1,\"bytes\":%llu,\"ms\":%lld}", static_cast<unsigned long long>(*moved),
      static_cast<long long>(ms.count()));
  return *moved == length ? 0 : 1;
}

int RunVerifyRead(const Args& args) {
  const char* role = "verify-read";
  auto client = ConnectOrDie(args, role);
  std::string name = args.Need("export");
  uint64_t seed = args.U64("seed", 1);
  auto timeout = std::chrono::milliseconds(args.U64("timeout-ms", 120000));
  auto remote = client->Resolve(name, args.Str("peer"));
  if (!remote.ok()) {
    std::fprintf(stderr, "%s: resolve: %s\n", role, remote.status().ToString().c_str());
    Say("{\"ok\":0,\"error\":\"resolve: %s\"}", CodeName(remote.status().code()));
    return 1;
  }
  uint64_t length = args.U64("size", remote->length);
  auto local = client->Alloc(length);
  if (!local.ok()) {
    Say("{\"ok\":0,\"error\":\"alloc: %s\"}", CodeName(local.status().code()));
    return 1;
  }
  // Poison the destination so a read that moves nothing cannot pass.
  std::memset(local->data(), 0xA5, length);
  auto pieces = Pieces(*local, *remote, length, args.U64("pieces", 16));
  auto start = std::chrono::steady_clock::now();
  auto moved = client->ReadBatch(pieces, timeout);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                  start);
  if (!moved.ok()) {
    std::fprintf(stderr, "verify-read: %s\n", moved.status().ToString().c_str());
    Say("{\"ok\":0,\"error\":\"%s\"}", CodeName(moved.status().code()));
    return 1;
  }
  VerifyResult r = VerifyPattern(local->data(), length, seed);
  Say("{\"ok\":%d,\"bytes\":%llu,\"bad_bytes\":%llu,\"first_bad\":%llu,\"ms\":%lld}",
      r.ok && *moved == length ? 1 : 0, static_cast<unsigned long long>(*moved),
      static_cast<unsigned long long>(r.bad_bytes), static_cast<unsigned long long>(r.first_bad),
      static_cast<long long>(ms.count()));
  return r.ok && *moved == length ? 0 : 1;
}

}  // namespace mcdma::itest
