// A client of etcd's v3 API (gRPC) for fabric membership: leases, keys
// under a prefix, and watches on the prefix.
//
// Every unary call is bounded by the client's rpc_timeout and fails with a
// named code whose message names the endpoint and the operation ("etcd
// 127.0.0.1:2379: Put /mcdma/x: ..."): UNAVAILABLE where the store cannot
// be reached, TIMEOUT where it did not answer in time. After either, the
// next call goes to the next endpoint (round robin), so one dead member of
// a cluster does not stop the client. Nothing retries inside a call: the
// caller paces its retries.
//
// Bounds: a key is at most kMaxKeyBytes, a value at most kMaxValueBytes,
// a listing at most kMaxListKeys keys and any one reply at most
// kMaxReplyBytes. A caller's argument over a bound is INVALID; a store
// that sends more than a bound gets NO_MEMORY, so a misbehaving store
// cannot make the daemon allocate without bound.
//
// Threads: an EtcdClient is thread-safe (calls from several threads run
// side by side). A Watch runs its own thread, which calls its callbacks.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "mcdma/status.hpp"

namespace mcdma::daemon::fabric {

struct EtcdKv {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t lease = 0;  // 0: none
};

struct EtcdEvent {
  enum class Type { kPut, kDelete };
  Type type = Type::kPut;
  EtcdKv kv;  // a delete's kv holds the key and the deletion's revision
};

struct EtcdListing {
  std::vector<EtcdKv> kvs;  // sorted by key
  int64_t revision = 0;     // the store's revision at the read
};

inline constexpr size_t kMaxKeyBytes = 1024;
inline constexpr size_t kMaxValueBytes = size_t{64} * 1024;
inline constexpr size_t kMaxListKeys = 10000;
inline constexpr int kMaxReplyBytes = 32 << 20;

// How a watch ends when its start revision was compacted away: OUT_OF_RANGE,
// the message carrying the compact revision. The caller lists again and
// watches from the new listing's revision.
inline constexpr Code kEtcdCompacted = Code::kOutOfRange;

// "etcd://host:port[,host:port...]" (or http://) as "host:port" endpoints.
// INVALID, naming what is wrong, for anything else: empty, no or bad port,
// an empty host, https (TLS is not supported yet), another scheme.
Result<std::vector<std::string>> ParseEtcdUrl(std::string_view url);

class EtcdClient {
 public:
  using Millis = std::chrono::milliseconds;
  using EventsFn = std::function<void(const std::vector<EtcdEvent>&, int64_t revision)>;
  using EndFn = std::function<void(Status)>;

  // A watch on a prefix, ended by Cancel() or destruction. Its thread
  // reads the stream and calls the callbacks; it never spins: a broken
  // stream ends the watch (the caller decides whether to watch again).
  // The callbacks may destroy the Watch (its thread is then left to finish
  // on its own, touching nothing of the Watch).
  class Watch {
   public:
    ~Watch();
    Watch(const Watch&) = delete;
    Watch& operator=(const Watch&) = delete;
    // Stops the watch and waits for its thread (unless called from it);
    // no callback runs after it returns. Idempotent.
    void Cancel();

   private:
    friend class EtcdClient;
    struct State;
    explicit Watch(std::shared_ptr<State> state);
    std::shared_ptr<State> state_;
    std::thread thread_;  // reads the stream; joined (or detached) by Cancel
  };

  // `endpoints`: "host:port", at least one. `rpc_timeout` bounds every
  // unary call and a watch's creation.
  EtcdClient(std::vector<std::string> endpoints, Millis rpc_timeout);
  ~EtcdClient();
  EtcdClient(const EtcdClient&) = delete;
  EtcdClient& operator=(const EtcdClient&) = delete;

  // A new lease of `ttl` (at least 1 s); its id.
  Result<int64_t> Grant(std::chrono::seconds ttl);
  // Renews the lease once; the TTL left in seconds. NOT_FOUND when the
  // lease is gone (expired or revoked).
  Result<int64_t> KeepAliveOnce(int64_t lease);
  // Ends the lease and deletes its keys; NOT_FOUND when it was gone.
  Status Revoke(int64_t lease);
  // `lease` 0: the key lives until deleted.
  Status Put(const std::string& key, const std::string& value, int64_t lease);
  // Put only where the key does not exist (a transaction on its
  // create_revision being 0); ALREADY_EXISTS where it does.
  Status Create(const std::string& key, const std::string& value, int64_t lease);
  // Deleting a key that does not exist is not an error.
  Status Delete(const std::string& key);
  // Every key under the prefix, sorted by key, and the revision read at.
  Result<EtcdListing> List(const std::string& prefix);
  // Compacts the store's history up to `revision` (tests and tools: a
  // watch from an older revision then ends with kEtcdCompacted).
  Status Compact(int64_t revision);

  // Watches every key under `prefix` from `start_revision` (0: from now;
  // a listing's revision + 1 continues it with nothing missed). Returns
  // once the store has created the watch (bounded by rpc_timeout); the
  // error then is the store's or the stream's, and no callback runs.
  //
  // On the watch's thread, in revision order: `on_events` with each
  // response's events and its header revision (an empty batch is a
  // progress notice: nothing under the prefix changed up to that
  // revision); `on_end`, once, when the watch ends for any reason but
  // Cancel() or destruction: UNAVAILABLE/TIMEOUT/... when the stream
  // broke, kEtcdCompacted when the start revision was compacted,
  // UNAVAILABLE when the store cancelled the watch, NO_MEMORY when an
  // event was over a bound.
  Result<std::unique_ptr<Watch>> WatchPrefix(const std::string& prefix, int64_t start_revision,
                                             EventsFn on_events, EndFn on_end);

  const std::vector<std::string>& endpoints() const { return endpoints_; }

 private:
  struct Endpoint;
  // After a failure with `code` on endpoint `index`: moves to the next
  // endpoint when the store was unreachable or slow.
  void OnFailure(size_t index, int grpc_code);
  template <typename Call>
  Status Unary(const std::string& op, Call call);

  const std::vector<std::string> endpoints_;
  const Millis rpc_timeout_;
  std::vector<std::unique_ptr<Endpoint>> channels_;  // one per endpoint, fixed
  // Index into channels_ of the endpoint calls go to; advanced with a
  // compare-exchange so that concurrent failures on one endpoint move on
  // by one, not by several.
  std::atomic<size_t> current_{0};
};

}  // namespace mcdma::daemon::fabric
