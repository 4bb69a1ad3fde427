// Fabric membership (docs/architecture.md §22): who the fabric's hosts are,
// from a store (etcd) or a static fabric file, and the links this host
// keeps to the members it reaches directly.
//
// With a store, one thread ("fabric") publishes this host's record under a
// lease and keeps the lease alive every third of its TTL, lists the
// fabric's records, watches them from the listing's revision, and
// republishes when this host's links change. On a watch error it lists
// again and watches from the new revision; when the store is unreachable
// it keeps the members and links it has, says so (`mcdmactl fabric`), and
// reconnects with backoff (250 ms doubling to a quarter of the lease, at
// most 5 s), granting a new lease
// if the old one expired. A member whose record goes away (its lease
// expired: the host died or lost the store) is evicted: its link is
// dropped. With a file, the members are the file's hosts and nothing runs.
//
// The links themselves are the link manager's (peer/link_manager.hpp): for
// each member it reaches directly with the lower host id, this host adds a
// link (origin "fabric"); the other end accepts it. Authentication stays
// the fabric key's: a member without the key is dialed and refused.
//
// Locking: mu_ guards the tables; the link manager is called without it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "config/options.hpp"
#include "fabric/fabric_view.hpp"
#include "fabric/routes.hpp"
#include "mcdma/status.hpp"
#include "mcdma/v1/admin.pb.h"
#include "mcdma/v1/peer.pb.h"
#include "mcdma_internal/thread_annotations.hpp"

namespace mcdma::daemon::fabric {

class EtcdClient;

// What membership needs of the link manager.
struct MembershipLinks {
  std::function<Status(const PeerConfig&)> dial;   // add a link this host dials
  std::function<Status(const std::string&)> drop;  // remove a host's links
  std::function<void(v1::LinksReply*)> describe;   // the links as they are
  // The routes changed (this host's instance id, and every route).
  std::function<void(const std::string&, const std::map<std::string, RouteEntry>&)> routes;
  // What the engine relayed, for `mcdmactl fabric`.
  std::function<void(v1::FabricRelay*)> relay;
};

class Membership {
 public:
  Membership(const Options& options, MembershipLinks links, std::string instance,
             uint16_t listen_port);
  ~Membership();
  Membership(const Membership&) = delete;
  Membership& operator=(const Membership&) = delete;

  // File: loads it (a bad file fails the start) and dials. Store: checks
  // the URL and starts the thread (an unreachable store does not fail
  // the start: the daemon serves and keeps trying).
  Status Start() MCDMA_EXCLUDES(mu_);
  // Withdraws this host's record (revokes its lease) so the others see it
  // leave at once, and stops the thread. Idempotent.
  void Stop() MCDMA_EXCLUDES(mu_);

  void Fill(v1::FabricReply* out) MCDMA_EXCLUDES(mu_);

 private:
  using Clock = std::chrono::steady_clock;
  struct Member {
    v1::FabricHostRecord record;
    Clock::time_point seen{};
    bool evicted = false;
  };

  void StoreLoop() MCDMA_EXCLUDES(mu_);
  // One session with the store: lease, publish, list, watch, keep alive;
  // returns why it ended.
  Status StoreSession(EtcdClient& client) MCDMA_EXCLUDES(mu_);
  // This host's record now (addresses, devices, links).
  v1::FabricHostRecord OwnRecord(const v1::LinksReply& links) const;
  // Replaces the members with a listing (members missing are evicted).
  void ReplaceAll(std::map<std::string, v1::FabricHostRecord> records) MCDMA_EXCLUDES(mu_);
  void Upsert(const std::string& host, const std::string& value) MCDMA_EXCLUDES(mu_);
  // Records a member's record as seen now (logging a join or a restart).
  void Take(const std::string& host, v1::FabricHostRecord record) MCDMA_REQUIRES(mu_);
  void Evict(const std::string& host) MCDMA_EXCLUDES(mu_);
  // Dials the members this host should dial, drops those it should not,
  // and recomputes the routes (handed on when they changed).
  void Reconcile() MCDMA_EXCLUDES(mu_);
  void UpdateRoutes() MCDMA_EXCLUDES(mu_);
  // The thread of a fabric file: reconciles every second (this host's
  // links come and go, and routes with them).
  void FileLoop() MCDMA_EXCLUDES(mu_);
  void SetStore(const std::string& state, const std::string& error) MCDMA_EXCLUDES(mu_);
  // Sleeps `d` unless stopping; false when stopping.
  bool Sleep(std::chrono::milliseconds d) MCDMA_EXCLUDES(mu_);

  const Options options_;
  const MembershipLinks links_;
  const std::string instance_;
  const uint16_t listen_port_;
  const uint64_t boot_generation_;
  const std::string prefix_;

  mutable Mutex mu_;
  std::condition_variable cv_;
  bool stopping_ MCDMA_GUARDED_BY(mu_) = false;
  bool started_ MCDMA_GUARDED_BY(mu_) = false;
  std::vector<LocalNet> nets_ MCDMA_GUARDED_BY(mu_);
  std::map<std::string, Member> members_ MCDMA_GUARDED_BY(mu_);
  // The file's cables (set only for a file with [[cable]] tables).
  std::unique_ptr<Cables> cables_ MCDMA_GUARDED_BY(mu_);
  // Hosts this host added links to, with the address dialed.
  std::map<std::string, std::string> dialed_ MCDMA_GUARDED_BY(mu_);
  std::string store_state_ MCDMA_GUARDED_BY(mu_);
  std::string store_error_ MCDMA_GUARDED_BY(mu_);
  int64_t lease_ MCDMA_GUARDED_BY(mu_) = 0;
  int64_t revision_ MCDMA_GUARDED_BY(mu_) = 0;
  uint64_t relists_ MCDMA_GUARDED_BY(mu_) = 0;
  bool watch_ended_ MCDMA_GUARDED_BY(mu_) = false;
  std::string watch_error_ MCDMA_GUARDED_BY(mu_);
  std::unique_ptr<EtcdClient> client_ MCDMA_GUARDED_BY(mu_);
  std::map<std::string, RouteEntry> routes_ MCDMA_GUARDED_BY(mu_);
  bool routes_pushed_ MCDMA_GUARDED_BY(mu_) = false;
  // The round trips of this host's links as its record last published
  // them: routes are computed from published round trips only, so every
  // daemon weighs a link alike, and load (which swells a measured round
  // trip) does not move routes back and forth.
  std::map<std::string, double> published_rtt_ MCDMA_GUARDED_BY(mu_);
  void NotePublished(const v1::FabricHostRecord& own) MCDMA_EXCLUDES(mu_);
  bool RoundTripsFell(const v1::FabricHostRecord& own) MCDMA_EXCLUDES(mu_);
  std::thread thread_;
};

}  // namespace mcdma::daemon::fabric
