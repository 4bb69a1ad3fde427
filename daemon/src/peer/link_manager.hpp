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
// Locking: mu_ guards the tables and every Entry in them; it is never held
// while calling into the engine (Engine::Run) or over gRPC. So the engine
// thread may take mu_: OnEngineLinkDown does, and so do the steps that
// install a link and record it in one go.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "config/options.hpp"
#include "engine/engine.hpp"
#include "mcdma/v1/admin.pb.h"
#include "mcdma/v1/peer.pb.h"
#include "mcdma_internal/thread_annotations.hpp"
#include "peer/peer_channel.hpp"
#include "peer/rail_plan.hpp"
#include "peer/transport_choice.hpp"

namespace mcdma::daemon {

// A peer's link as `mcdmactl links` shows it (the state machine above).
enum class PeerState : uint8_t { kConnecting, kUp, kReconnecting, kRefused, kDown };
std::string_view PeerStateName(PeerState s);  // "connecting", "up", ...
// How this host knows a peer: from the config file, added at run time
// (mcdmactl link add), because it dialed this host, or because fabric
// membership added it (fabric/membership.hpp).
enum class PeerOrigin : uint8_t { kConfig, kRuntime, kIncoming, kFabric };
std::string_view PeerOriginName(PeerOrigin o);  // "config", "runtime", "incoming"

class LinkManager {
 public:
  LinkManager(const Options& options, Engine& engine, std::shared_ptr<const FabricKey> key,
              std::shared_ptr<grpc::ChannelCredentials> creds, uint16_t listen_port);
  ~LinkManager();
  LinkManager(const LinkManager&) = delete;
  LinkManager& operator=(const LinkManager&) = delete;

  // Starts a thread per configured peer.
  void Start() MCDMA_EXCLUDES(mu_);
  // Says Goodbye to every peer, stops the threads. Idempotent.
  void Stop(v1::PeerGoodbyeReason reason) MCDMA_EXCLUDES(mu_);

  const std::string& instance_id() const { return instance_id_; }
  // Before Start (read by the dialing threads without a lock): the port peers
  // call back on (the bound one).
  void set_listen_port(uint16_t port) { listen_port_ = port; }
  void set_listen_address(std::string address) { listen_address_ = std::move(address); }

  // ---- Admin ----
  Status Add(const PeerConfig& peer, PeerOrigin origin = PeerOrigin::kRuntime) MCDMA_EXCLUDES(mu_);
  Status Remove(const std::string& peer) MCDMA_EXCLUDES(mu_);
  void Fill(v1::LinksReply* out) MCDMA_EXCLUDES(mu_);
  Result<v1::LinkTestReply> Test(const std::string& peer, uint32_t bytes, uint32_t count)
      MCDMA_EXCLUDES(mu_);

  // ---- Apps (control plane) ----
  Result<uint64_t> LookupService(uint64_t session, const std::string& peer,
                                 const std::string& service) MCDMA_EXCLUDES(mu_);
  Result<ResolveInfo> Resolve(uint64_t session, const std::string& peer, const std::string& name)
      MCDMA_EXCLUDES(mu_);
  // LookupService of a host reached only through other daemons (a route
  // the fabric computed): in-band over the engine's routed link.
  Result<uint64_t> LookupRouted(uint64_t session, const std::string& peer,
                                const std::string& service) MCDMA_EXCLUDES(mu_);
  // Resolve of such a host: the export must be granted to this host.
  Result<ResolveInfo> ResolveRouted(uint64_t session, const std::string& peer,
                                    const std::string& name) MCDMA_EXCLUDES(mu_);

  // ---- The Peer service (callee side); `host` is the ticket's host id ----
  v1::PeerHelloReply OnHello(const std::string& host, const v1::PeerHelloRequest& req,
                             const std::string& source_ip) MCDMA_EXCLUDES(mu_);
  Result<v1::PeerConnectReply> OnConnect(const std::string& host, const v1::PeerConnectRequest& req,
                                         const std::string& source_ip) MCDMA_EXCLUDES(mu_);
  Result<v1::PeerHeartbeatReply> OnHeartbeat(const std::string& host,
                                             const v1::PeerHeartbeatRequest& req)
      MCDMA_EXCLUDES(mu_);
  void OnGoodbye(const std::string& host, const v1::PeerGoodbyeRequest& req) MCDMA_EXCLUDES(mu_);
  Result<v1::PeerAddRailReply> OnAddRail(const std::string& host, const v1::PeerAddRailRequest& req)
      MCDMA_EXCLUDES(mu_);

 private:
  using TimePoint = std::chrono::steady_clock::time_point;
  // One peer's link. Every field is under mu_, except `config` of a dialed
  // peer (fixed at creation) and what its own dialing thread wrote and
  // reads back (`generation`). The analysis cannot name the manager's mu_
  // from inside Entry; the tables that hold entries are checked, and the
  // helpers handed an Entry say MCDMA_REQUIRES(mu_) where they touch it.
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
    // The lowest round trip since the link last came up (0: none yet).
    double rtt_min_us = 0;
    TimePoint last_heartbeat{};
    uint64_t heartbeats_sent = 0;
    uint64_t heartbeats_ok = 0;
    uint64_t heartbeats_missed = 0;
    uint64_t downs = 0;
    uint64_t reconnects = 0;
    bool removed = false;
    std::thread thread;
    // Rails beyond the link's own connection (link_manager_rails.cpp), by
    // canonical index: whether up, and when a failed or unreached one is
    // probed again. The dialer probes; both ends watch their interfaces.
    struct RailTry {
      bool up = false;
      std::string local;   // this host's rail name
      std::string remote;  // the peer's
      uint8_t slot = 0;    // verbs: this host's RDMA port (its state is watched)
      std::string transport = "tcp";
      std::string device;  // verbs: this host's device and port, and the peer's device
      uint32_t port = 0;
      std::string peer_device;
      TimePoint retry_at{};
      std::string last_error;
      uint64_t downs = 0;
      uint32_t fails = 0;     // probes failed in a row
      uint32_t end_down = 0;  // probes the peer refused in a row, its end not ready

      // Takes the pair's names and this end's device from `spec`.
      void Describe(const RailSpec& spec) {
        local = spec.local;
        remote = spec.remote;
        slot = spec.transport == Transport::kVerbs ? spec.slot : 0;
        transport = std::string(TransportName(spec.transport));
        device = spec.device;
        port = spec.port;
        peer_device = spec.transport == Transport::kVerbs ? spec.peer_device : "";
      }
      // What the interface watch needs of this end (RailEndReady).
      RailSpec WatchSpec() const {
        RailSpec spec;
        spec.local = local;
        spec.slot = slot;
        spec.device = device;
        spec.port = port;
        spec.transport = transport == "verbs" ? Transport::kVerbs : Transport::kTcp;
        return spec;
      }
    };
    std::map<uint32_t, RailTry> rails;
    RailOffer peer_rails;  // dialer: what the peer announced in its Hello reply
  };
  struct PeerInfo {
    std::string instance;
    std::string version;
    std::string callback;  // host:port of its Peer service, as it told us
    RailOffer rails;       // what it announced in Hello (empty if refused)
  };

  // What a Connect from a peer asked for, carried to the thread that
  // completes its data connection.
  struct IncomingAttempt {
    std::string host;      // the caller's host id
    std::string instance;  // its instance id, from its Hello
    uint64_t generation = 0;
    std::string remote;  // its endpoint info (tcp: rebased on its address)
    uint32_t remote_slot_bytes = 0;
    Transport transport = Transport::kTcp;
  };

  // One row of `mcdmactl links` (without the engine's counters).
  void DescribeLink(const std::string& name, const Entry& e, TimePoint now, v1::LinkInfo* li) const
      MCDMA_REQUIRES(mu_);

  // The transports this host offers in Hello, most preferred first.
  void OfferTransports(google::protobuf::RepeatedPtrField<v1::PeerTransport>* out) const;
  v1::PeerHelloRequest HelloRequest() const;
  // A link endpoint of the engine's device for `transport` (UNAVAILABLE
  // once the engine has stopped).
  Result<std::unique_ptr<driver::Endpoint>> NewLinkEndpoint(Transport transport)
      MCDMA_EXCLUDES(mu_);

  // ---- Dialing (link_manager.cpp): the thread of a peer this host dials ----
  void DialLoop(Entry* e) MCDMA_EXCLUDES(mu_);
  // One attempt: Hello, the transport choice, Connect, the data connection.
  Status ConnectOnce(Entry* e) MCDMA_EXCLUDES(mu_);
  // The channel to the dialed peer, made anew when its address changed.
  std::shared_ptr<PeerChannel> DialChannel(const Entry& e) MCDMA_EXCLUDES(mu_);
  // Hello, and whether the daemon that answered is the one configured.
  Result<v1::PeerHelloReply> SayHello(const Entry& e, PeerChannel& ch);
  // The transport for the link from the config and what both ends offer.
  Result<TransportChoice> ChooseOutgoingTransport(const Entry& e,
                                                  const v1::PeerHelloReply& hello) const;
  // Records the peer's instance and the transport chosen; drops the
  // peer's links on the engine when it restarted.
  void NoteHelloReply(Entry* e, const v1::PeerHelloReply& hello, const TransportChoice& choice)
      MCDMA_EXCLUDES(mu_);
  // Installs the connected link on the engine and marks the entry up;
  // `conn` is taken only when installed.
  Status InstallOutgoing(Entry* e, const LinkSpec& spec, std::unique_ptr<driver::Connection>& conn,
                         const v1::VerbsPath& path) MCDMA_EXCLUDES(mu_);
  // Heartbeats until the link goes down; returns why.
  std::string HeartbeatLoop(Entry* e) MCDMA_EXCLUDES(mu_);
  // Drops the entry's link on the engine, if it still has one, for `why`.
  void DropOutgoingLink(Entry* e, const std::string& why) MCDMA_EXCLUDES(mu_);
  // Waits `d`, or until the link is lost; false when stopping or removed.
  bool Wait(Entry* e, std::chrono::milliseconds d) MCDMA_EXCLUDES(mu_);

  // ---- Incoming links (link_manager_callee.cpp) ----
  // The transport a dialing peer asked for, if this host offers it.
  Result<Transport> OfferedTransport(const std::string& name) const;
  // The incoming entry of `host` (made at its first Connect) for an attempt
  // under `generation`, and the instance its Hello gave. Fails while
  // stopping, before Hello, and for a generation not above the entry's.
  Result<Entry*> AdmitIncoming(const std::string& host, uint64_t generation, std::string* instance)
      MCDMA_EXCLUDES(mu_);
  // Records the attempt on the entry and starts the thread that completes
  // its data connection; returns the link it replaces (0: none).
  Result<uint64_t> BeginIncoming(Entry* e, std::shared_ptr<driver::Endpoint> endpoint,
                                 IncomingAttempt attempt, const std::string& transport_name,
                                 const v1::VerbsPath& path) MCDMA_EXCLUDES(mu_);
  // The connector thread: connects to the peer's endpoint, installs the
  // link unless a newer attempt superseded it, records the outcome.
  void CompleteIncoming(Entry* e, driver::Endpoint& endpoint, const IncomingAttempt& attempt)
      MCDMA_EXCLUDES(mu_);
  // Installs the incoming link on the engine and marks the entry up;
  // `conn` is taken only when installed.
  Status InstallIncoming(Entry* e, const IncomingAttempt& attempt,
                         std::unique_ptr<driver::Connection>& conn) MCDMA_EXCLUDES(mu_);
  // Joins the connector threads that have finished (reconnect storms must
  // not pile up threads).
  void JoinFinishedConnectors() MCDMA_REQUIRES(mu_);

  void SweepLoop() MCDMA_EXCLUDES(mu_);

  // ---- Rails (link_manager_rails.cpp) ----
  // The dialer's rail thread while its link is up: probes every candidate
  // pair not up whose hold-down has passed and whose interface runs.
  void RailLoop(Entry* e, uint64_t generation, uint64_t link_id) MCDMA_EXCLUDES(mu_);
  // One probe: AddRail, both ends connect, the engine takes the rail.
  Status ProbeRail(Entry* e, PeerChannel& ch, const RailPair& pair, uint64_t generation,
                   uint64_t link_id) MCDMA_EXCLUDES(mu_);
  // Every 100 ms: takes out the up rails whose local interface stopped
  // running or whose RDMA port is not ACTIVE (both ends).
  void RailWatchLoop() MCDMA_EXCLUDES(mu_);
  // `never_up`: the rail failed its probe (counts as a failed probe).
  void OnEngineRailDown(uint64_t link_id, uint32_t index, const std::string& why, bool never_up)
      MCDMA_EXCLUDES(mu_);
  // The engine's view of a pair from this end (`dialer` or not), with the
  // peer's receive slot size.
  RailSpec SpecOf(const RailPair& pair, bool dialer, uint32_t peer_slot_bytes) const;
  // Whether this end's side of a pair can be used now: its interface runs
  // (tcp) or its RDMA port is ACTIVE (verbs); the error says why not.
  Status RailEndReady(const RailSpec& spec) const;
  // An endpoint for this end of a pair (tcp: bound to its address, with
  // the probe's timeout; verbs: a queue pair on its port).
  Result<std::unique_ptr<driver::Endpoint>> RailEndpoint(const RailSpec& spec);
  // The RDMA port of this host announced as rail `name`, or null.
  const LocalVerbsInfo* RdmaPortNamed(const std::string& name) const;
  // The rails a peer announced, or none (logged) when the announcement is
  // refused: the link then runs on its own connection.
  RailOffer AcceptRails(const std::string& peer, const RailOffer& offered) const;
  // Rows for `mcdmactl links`: the engine's rails, then candidates never up.
  void DescribeRails(const Entry& e, TimePoint now, const std::vector<RailSnapshot>& engine_rails,
                     v1::LinkInfo* li) const MCDMA_REQUIRES(mu_);
  void SetState(Entry* e, PeerState state) MCDMA_REQUIRES(mu_);
  // Records a peer's instance id; true when it changed (the peer
  // restarted): its incoming entry is reset. The caller then drops the
  // peer's links on the engine (without mu_).
  bool NotePeerInstance(const std::string& host, const std::string& instance,
                        const std::string& version) MCDMA_REQUIRES(mu_);
  void OnEngineLinkDown(uint64_t link_id, const std::string& why) MCDMA_EXCLUDES(mu_);
  // The channel for calls to `peer`: its configured address, or where it
  // told us it listens. NOT_FOUND if neither.
  Result<std::shared_ptr<PeerChannel>> ChannelFor(const std::string& peer) MCDMA_EXCLUDES(mu_);
  std::shared_ptr<PeerChannel> MakeChannel(const std::string& target, const std::string& peer);
  // LINK_DOWN with the link's state and last error unless one is up.
  Status RequireUp(const std::string& peer) MCDMA_EXCLUDES(mu_);

  const Options options_;
  Engine& engine_;
  std::shared_ptr<const FabricKey> key_;
  std::shared_ptr<grpc::ChannelCredentials> creds_;
  uint16_t listen_port_;
  std::string listen_address_;
  const std::string instance_id_;
  const std::chrono::milliseconds rpc_timeout_;

  Mutex mu_;
  std::condition_variable cv_;
  bool stopping_ MCDMA_GUARDED_BY(mu_) = false;
  // Peers we dial.
  std::map<std::string, std::unique_ptr<Entry>> out_ MCDMA_GUARDED_BY(mu_);
  // Peers that dialed us.
  std::map<std::string, std::unique_ptr<Entry>> in_ MCDMA_GUARDED_BY(mu_);
  // Removed; their threads are joined at Stop.
  std::vector<std::unique_ptr<Entry>> retired_ MCDMA_GUARDED_BY(mu_);
  std::map<std::string, PeerInfo> peers_ MCDMA_GUARDED_BY(mu_);
  std::map<std::string, std::shared_ptr<PeerChannel>> channels_ MCDMA_GUARDED_BY(mu_);
  struct Connector {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  // Callee-side Endpoint::Connect calls.
  std::vector<Connector> connectors_ MCDMA_GUARDED_BY(mu_);
  std::thread sweeper_ MCDMA_GUARDED_BY(mu_);
  std::thread rail_watch_ MCDMA_GUARDED_BY(mu_);
  const RailOffer own_rails_;
};

}  // namespace mcdma::daemon
