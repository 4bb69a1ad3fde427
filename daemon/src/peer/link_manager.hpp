// Links to peer daemons: who they are, how to reach them, and each link's
// state machine. For a peer this host dials (configured, or added at run
// time) one thread runs
//
//   connecting -> Hello -> Connect (endpoint exchange) -> up
//   up -> heartbeat every heartbeat_ms; a failed heartbeat for timeout_ms, a
//         generation mismatch, or the data path failing -> reconnecting
//   reconnecting -> wait (backoff doubling from reconnect_min_ms to
//         reconnect_max_ms) -> Hello -> Connect under generation + 1 -> up
//   refused (the peer or we rejected the other: fabric key, host id,
//         transport) -> retried at reconnect_max_ms only
//
// A peer that dialed this host has an "incoming" entry with no thread: it is
// up from its Connect until its heartbeats stop for timeout_ms, its data
// path fails, or it says Goodbye.
//
// Locking: mu_ guards the tables; it is never held while calling into the
// engine (Engine::Run) or over gRPC. The engine calls OnEngineLinkDown on
// its own thread; that only takes mu_ and wakes the link's thread.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "engine/engine.hpp"
#include "mcdma/v1/admin.pb.h"
#include "mcdma/v1/peer.pb.h"
#include "config/options.hpp"
#include "peer/peer_channel.hpp"

namespace mcdma::daemon {

// A peer's link as `mcdmactl links` shows it (the state machine above).
enum class PeerState : uint8_t { kConnecting, kUp, kReconnecting, kRefused, kDown };
std::string_view PeerStateName(PeerState s);  // "connecting", "up", ...
// How this host knows a peer: from the config file, added at run time
// (mcdmactl link add), or because it dialed this host.
enum class PeerOrigin : uint8_t { kConfig, kRuntime, kIncoming };
std::string_view PeerOriginName(PeerOrigin o);  // "config", "runtime", "incoming"

class LinkManager {
 public:
  LinkManager(const Options& options, Engine& engine, std::shared_ptr<const FabricKey> key,
              std::shared_ptr<grpc::ChannelCredentials> creds, uint16_t listen_port);
  ~LinkManager();
  LinkManager(const LinkManager&) = delete;
  LinkManager& operator=(const LinkManager&) = delete;

  // Starts a thread per configured peer.
  void Start();
  // Says Goodbye to every peer, stops the threads. Idempotent.
  void Stop(v1::PeerGoodbyeReason reason);

  const std::string& instance_id() const { return instance_id_; }
  // Before Start: the port peers call back on (the bound one).
  void set_listen_port(uint16_t port) { listen_port_ = port; }
  void set_listen_address(std::string address) { listen_address_ = std::move(address); }

  // ---- Admin ----
  Status Add(const PeerConfig& peer);
  Status Remove(const std::string& peer);
  void Fill(v1::LinksReply* out);
  Result<v1::LinkTestReply> Test(const std::string& peer, uint32_t bytes, uint32_t count);

  // ---- Apps (control plane) ----
  Result<uint64_t> LookupService(uint64_t session, const std::string& peer,
                                 const std::string& service);
  Result<ResolveInfo> Resolve(uint64_t session, const std::string& peer, const std::string& name);

  // ---- The Peer service (callee side); `host` is the ticket's host id ----
  v1::PeerHelloReply OnHello(const std::string& host, const v1::PeerHelloRequest& req,
                             const std::string& source_ip);
  Result<v1::PeerConnectReply> OnConnect(const std::string& host, const v1::PeerConnectRequest& req,
                                         const std::string& source_ip);
  Result<v1::PeerHeartbeatReply> OnHeartbeat(const std::string& host,
                                             const v1::PeerHeartbeatRequest& req);
  void OnGoodbye(const std::string& host, const v1::PeerGoodbyeRequest& req);

 private:
  using TimePoint = std::chrono::steady_clock::time_point;
  struct Entry {
    PeerConfig config;
    PeerOrigin origin = PeerOrigin::kConfig;
    PeerState state = PeerState::kConnecting;
    TimePoint state_since = std::chrono::steady_clock::now();
    TimePoint retry_at{};
    std::optional<Transport> transport;  // none until one is chosen
    std::string transport_reason;
    v1::VerbsPath verbs_path;  // set while transport is kVerbs
    uint64_t generation = 0;
    uint64_t link_id = 0;  // engine link; 0 when none
    bool link_lost = false;
    bool said_goodbye = false;
    bool ever_up = false;  // a later "up" is a reconnect
    // The latest error and its reason (the reason only where the error came
    // as a Status that had one: tools decide on it, never on the text).
    std::string last_error;
    Reason last_error_reason = Reason::kNone;
    std::string down_reason;  // last_error when the link last left "up"
    double rtt_us = 0;
    double rtt_avg_us = 0;
    TimePoint last_heartbeat{};
    uint64_t heartbeats_sent = 0;
    uint64_t heartbeats_ok = 0;
    uint64_t heartbeats_missed = 0;
    uint64_t downs = 0;
    uint64_t reconnects = 0;
    bool removed = false;
    std::thread thread;
  };
  struct PeerInfo {
    std::string instance;
    std::string version;
    std::string callback;  // host:port of its Peer service, as it told us
  };

  // The transports this host offers in Hello, most preferred first.
  void OfferTransports(google::protobuf::RepeatedPtrField<v1::PeerTransport>* out) const;
  void DialLoop(Entry* e);
  Status ConnectOnce(Entry* e);
  // Heartbeats until the link goes down; returns why.
  std::string HeartbeatLoop(Entry* e);
  void SweepLoop();
  void SetState(Entry* e, PeerState state);  // mu_ held
  // Records a peer's instance id (mu_ held); true when it changed (the peer
  // restarted): its incoming entry is reset. The caller then drops the
  // peer's links on the engine (without mu_).
  bool NotePeerInstance(const std::string& host, const std::string& instance,
                        const std::string& version);
  void OnEngineLinkDown(uint64_t link_id, const std::string& why);
  // The channel for calls to `peer`: its configured address, or where it
  // told us it listens. NOT_FOUND if neither.
  Result<std::shared_ptr<PeerChannel>> ChannelFor(const std::string& peer);
  std::shared_ptr<PeerChannel> MakeChannel(const std::string& target, const std::string& peer);
  // LINK_DOWN with the link's state and last error unless one is up.
  Status RequireUp(const std::string& peer);
  bool Wait(Entry* e, std::chrono::milliseconds d);  // false when stopping/removed
  v1::PeerHelloRequest HelloRequest() const;

  const Options options_;
  Engine& engine_;
  std::shared_ptr<const FabricKey> key_;
  std::shared_ptr<grpc::ChannelCredentials> creds_;
  uint16_t listen_port_;
  std::string listen_address_;
  const std::string instance_id_;
  const std::chrono::milliseconds rpc_timeout_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::map<std::string, std::unique_ptr<Entry>> out_;  // peers we dial
  std::map<std::string, std::unique_ptr<Entry>> in_;   // peers that dialed us
  std::vector<std::unique_ptr<Entry>> retired_;        // removed, thread joined at Stop
  std::map<std::string, PeerInfo> peers_;
  std::map<std::string, std::shared_ptr<PeerChannel>> channels_;
  struct Connector {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::vector<Connector> connectors_;  // callee-side Endpoint::Connect calls
  std::thread sweeper_;
};

}  // namespace mcdma::daemon
