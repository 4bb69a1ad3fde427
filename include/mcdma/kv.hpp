// libmcdma's KV-cache hand-off: a prefill engine offers the KV cache of a
// request layer by layer (kv::Export); a decoder on another host (or this
// one) pulls each layer as soon as it is published (kv::Import). The same
// protocol (docs/protocol.md §18) as Python's mcdma.kv, which sits on this
// code, so a C++ engine and a Python one hand caches to each other.
//
//   // host A (producer)
//   std::vector<mcdma::Buffer> layers = ...;          // compute into these
//   auto exp = mcdma::kv::Export::Create(*client, "req-42", layers,
//                                        R"({"dtype":"bfloat16","token_digest":"..."})",
//                                        {.allowed_peers = {"host-b"}});
//   for (uint32_t i = 0; i < n; ++i) { ...; (*exp)->PublishLayer(i); }
//   (*exp)->WaitConsumed(1, std::chrono::seconds(30));
//
//   // host B (consumer)
//   mcdma::kv::BufferPool pool(*client);              // reused across hand-offs
//   auto imp = mcdma::kv::Import::Open(*client, "host-a", "req-42",
//                                      {.expect_json = R"({"dtype":"bfloat16"})",
//                                       .token_digest = "...", .pool = &pool});
//   (*imp)->Pull([](uint32_t layer) { ... });         // layer landed, verified
//
// Errors: every failure is a Status. Those that belong to the hand-off carry
// a Reason (status.hpp): kHandoffManifest / kHandoffDigest (INVALID, before
// any byte moved), kHandoffExpired / kHandoffRevoked (REVOKED),
// kHandoffProducerGone (PEER_GONE), kHandoffChecksum (INTERNAL); a dropped
// link is LINK_DOWN and the consumer's deadline TIMEOUT. Messages name the
// hand-off ("hand-off req-42: ...").
//
// Threads: Export's methods may be called from any thread; consumers' calls
// are answered on the client's handler thread without blocking it. An
// Import is pulled by one thread (Pull); WaitLayer, stats and Close may be
// called from others.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "mcdma/client.hpp"
#include "mcdma/status.hpp"

namespace mcdma::kv {

namespace internal {
struct ExportImpl;
struct ImportImpl;
}  // namespace internal

inline constexpr std::string_view kFormat = "mcdma.kv/1";
// Ceilings on what a manifest may announce, so a bad one cannot make a
// consumer allocate without bound.
inline constexpr uint32_t kMaxLayers = 4096;
inline constexpr uint64_t kMaxLayerBytes = uint64_t{1} << 40;

// OK when `handoff_id` is 1 to 64 of [A-Za-z0-9._:-]; INVALID otherwise.
Status CheckId(std::string_view handoff_id);

enum class State { kOpen, kClosed, kRevoked, kExpired };
// "open", "closed", "revoked", "expired".
const char* StateName(State state);

// XXH3-64 of `bytes`, the hand-off's layer checksum.
uint64_t Checksum(std::span<const std::byte> bytes);

// Buffers for consumers to pull into, reused across hand-offs: the first
// touch of fresh shared memory costs more than moving the bytes into it
// (docs/measurements.md). A buffer taken from the pool is the caller's
// while any copy of it lives outside the pool; once only the pool holds it
// again it is free for the next Take. At most `max_idle_bytes` of free
// buffers are kept; more are handed back to the daemon.
class BufferPool {
 public:
  explicit BufferPool(Client& client, uint64_t max_idle_bytes = uint64_t{4} << 30);
  ~BufferPool();
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  // A free buffer of at least `size` bytes (the smallest that fits, and at
  // most twice the size), or a new one from the daemon.
  Result<Buffer> Take(uint64_t size);
  // Frees every buffer nobody else holds.
  void Trim();
  struct Counters {
    uint64_t buffers = 0;     // held by the pool (free or in use)
    uint64_t free_bytes = 0;  // of those nobody else holds
    uint64_t hits = 0;        // Takes served by a reused buffer
    uint64_t misses = 0;      // Takes that allocated
  };
  Counters counters() const;

 private:
  void TrimLocked(uint64_t keep_bytes);
  Client& client_;
  uint64_t max_idle_bytes_;
  mutable std::mutex mu_;
  std::vector<Buffer> buffers_;  // GUARDED_BY(mu_)
  uint64_t hits_ = 0;            // GUARDED_BY(mu_)
  uint64_t misses_ = 0;          // GUARDED_BY(mu_)
};

struct ExportOptions {
  std::vector<std::string> allowed_peers;  // hosts whose apps may pull it
  std::chrono::milliseconds ttl{600000};   // until it expires; 0: until closed
  // Publish each layer's XXH3-64 for consumers to check (ImportOptions::
  // verify). Off by default: it costs a pass over the cache on each end,
  // on the producer before each layer is announced (docs/architecture.md
  // §18.3).
  bool checksum = false;
};

class Export {
 public:
  // Offers `layers` (buffers of `client`, exported as they are: zero-copy)
  // as hand-off `handoff_id`. `manifest_json` is a JSON object of the
  // producer's facts a consumer checks before any byte moves (dtype,
  // geometry, token_digest...); format, handoff_id, n_layers, layer_nbytes
  // and checksum are added. INVALID for a bad id, no layers, a layer that
  // is not a buffer, or a manifest that is not a JSON object;
  // ALREADY_EXISTS when the id is offered on this host already.
  static Result<std::unique_ptr<Export>> Create(Client& client, std::string_view handoff_id,
                                                std::vector<Buffer> layers,
                                                std::string_view manifest_json,
                                                const ExportOptions& options = {});
  // Close()s it.
  ~Export();
  Export(const Export&) = delete;
  Export& operator=(const Export&) = delete;

  const std::string& handoff_id() const;
  const std::vector<Buffer>& buffers() const;
  // The manifest as consumers see it (JSON).
  std::string manifest_json() const;
  // kExpired once the TTL passed (consumers are told then, at the latest by
  // the next call of any method here).
  State state();
  // Layer `layer` is final: checksums it (with options.checksum) and
  // notifies every consumer.
  // OUT_OF_RANGE for a bad index, ALREADY_EXISTS when published already,
  // INVALID once the hand-off has ended.
  Status PublishLayer(uint32_t layer);
  // Publishes every layer not published yet, in order.
  Status PublishAll();
  // Waits until `count` consumers have every layer; returns their hosts.
  // TIMEOUT when they have not within `timeout`.
  Result<std::vector<std::string>> WaitConsumed(uint32_t count, std::chrono::milliseconds timeout);
  // Ends it early: exports withdrawn, consumers told, its service answers
  // "revoked" with `reason` until Close.
  Status Revoke(std::string_view reason);
  // Withdraws everything; consumers are told "closed". Idempotent.
  void Close();

 private:
  explicit Export(std::shared_ptr<internal::ExportImpl> impl);
  std::shared_ptr<internal::ExportImpl> impl_;
};

struct ImportOptions {
  // A JSON object: every key must be equal in the producer's manifest
  // (else kHandoffManifest, naming each difference). Empty: none.
  std::string expect_json;
  // When not empty, the manifest's token_digest must be this
  // (else kHandoffDigest).
  std::string token_digest;
  // From Open: by when every layer must have landed (else TIMEOUT).
  std::chrono::milliseconds deadline{60000};
  // Check each layer's published XXH3-64 (else kHandoffChecksum).
  bool verify = true;
  // Retry the open this long while no producer serves the hand-off yet.
  std::chrono::milliseconds open_wait{0};
  // Where the layers land: these buffers (one per layer, each at least its
  // size), else buffers from `pool`, else fresh buffers.
  std::vector<Buffer> buffers;
  BufferPool* pool = nullptr;
};

struct LayerStats {
  uint32_t index = 0;
  uint64_t nbytes = 0;
  double published_at = 0;  // s from Open: its layer event arrived
  double pull_s = 0;        // the read, from its start to its end
  double verify_s = 0;      // the checksum
  double landed_at = 0;     // s from Open: pulled and verified
};

struct ImportStats {
  double open_s = 0;   // open call, manifest checks, buffers
  double total_s = 0;  // Open start -> last layer landed
  uint64_t bytes = 0;
  std::vector<LayerStats> layers;
};

class Import {
 public:
  // Opens hand-off `handoff_id` of an app on host `peer` (empty: this
  // host), checks its manifest and prepares the buffers; each layer is
  // resolved by the pull, just before its read. Errors: see the top of
  // this file.
  static Result<std::unique_ptr<Import>> Open(Client& client, std::string_view peer,
                                              std::string_view handoff_id,
                                              const ImportOptions& options = {});
  ~Import();
  Import(const Import&) = delete;
  Import& operator=(const Import&) = delete;

  const std::string& handoff_id() const;
  // The producer's manifest (JSON), checked.
  const std::string& manifest_json() const;
  const std::vector<uint64_t>& layer_nbytes() const;
  // One per layer; layer i's bytes are final once it landed.
  const std::vector<Buffer>& buffers() const;

  // Pulls every layer as soon as it is published (one read in flight while
  // the previous layer is verified); calls on_layer(i) on this thread once
  // layer i landed. Once only; the error is also what WaitLayer reports.
  Status Pull(const std::function<void(uint32_t)>& on_layer = {});
  // Blocks until layer `layer` landed (after Pull started on another
  // thread); the pull's error, or TIMEOUT after `timeout`.
  Result<LayerStats> WaitLayer(uint32_t layer, std::chrono::milliseconds timeout);
  ImportStats stats() const;
  // Stops listening, hands the remote handles back (the buffers stay valid
  // while referenced). Idempotent; not while Pull runs.
  void Close();

 private:
  explicit Import(std::unique_ptr<internal::ImportImpl> impl);
  std::unique_ptr<internal::ImportImpl> impl_;
};

}  // namespace mcdma::kv
