// The engine: the one thread that owns the sessions' rings, the transport
// devices and their connections, and every record (buffers, exports,
// services, calls, transfers, links). gRPC handler threads never touch any
// of it: they hand the engine a closure through Run() and wait for its
// result.
//
// Loop: run queued commands; consume each session's submission ring (a
// bounded batch per session per round, so one busy app cannot starve the
// others); post and reap transport work; flush backlogs; expire deadlines.
// When a round finds nothing to do the engine spins (yielding) for
// Options::spin_budget_us, or while a link saw traffic within
// Options::link_poll_us (a reply or the next request is likely soon, and
// sleeping would cost an interrupt and two thread wake-ups), then arms the
// links' wake-ups and sleeps on all sessions' bells at once (futex_waitv)
// with a timeout set by the nearest deadline.
//
// Where things are:
//   engine.cpp           the thread, the loop, the command queue, sleeping,
//                        deadline expiry and the periodic sweep
//   engine_submit.cpp    a session's submission ring: validating descriptors,
//                        dispatching opcodes, completions, evictions
//   engine_calls.cpp     CALL/NOTIFY/REPLY, one path for local and link calls
//                        (OfferToService, AnswerCaller)
//   engine_transfer.cpp  READ/WRITE: validation, chunking, completions,
//                        revoke acks
//   engine_link.cpp      links' data path: install/drop, fragments, dispatch
//                        of link messages, echoes
//   engine_peer.cpp      the peer plane's engine side: peers' services and
//                        exports for apps here, exports of ours for peers
//   engine_control.cpp   sessions, buffers, exports and services for the
//                        Control service
//   engine_admin.cpp     snapshots for the Admin service
// Components, each engine-thread only and tested alone (tests/engine):
//   engine/call_table.hpp     CallTable: pending calls and their deadlines
//   engine/link_table.hpp     LinkTable: links, their counters by (peer, origin),
//                        echo waiters
//   engine/reassembler.hpp Reassembler: a link's messages from fragments
//   engine/session_table.hpp  SessionTable: the sessions served, reaped counts
//   engine/registry.hpp  Registry: buffers, exports, services and names,
//                        unmapped segments, draining revocations
//   engine/transfer_table.hpp TransferTable: transfers in progress, revoke acks
//                        owed; NextPiece: how a transfer is cut
//   engine/snapshots.hpp plain snapshots the Admin service converts
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <span>
#include <string>
#include <thread>
#include <type_traits>
#include <unordered_map>

#include "config/options.hpp"
#include "driver/transport.hpp"
#include "engine/call_table.hpp"
#include "engine/link.hpp"
#include "engine/link_table.hpp"
#include "engine/registry.hpp"
#include "engine/resources.hpp"
#include "engine/route_wire.hpp"
#include "engine/session.hpp"
#include "engine/session_table.hpp"
#include "engine/snapshots.hpp"
#include "engine/trace_log.hpp"
#include "engine/transfer_table.hpp"
#include "engine/user_table.hpp"
#include "mcdma_internal/thread_annotations.hpp"
#include "mcdma_internal/wait.hpp"

namespace mcdma::daemon {

struct HelloInfo {
  std::string app_name;
  uint32_t pid = 0;
  uint32_t uid = 0;
  uint32_t submission_entries = 0;
  uint32_t completion_entries = 0;
  uint32_t inbox_entries = 0;
  uint64_t arena_bytes = 0;
};

struct OpenedInfo {
  uint64_t session_id = 0;
  std::string token;
  std::string mailbox_segment;
  uint64_t mailbox_bytes = 0;
};

struct AllocInfo {
  uint64_t buffer_id = 0;
  std::string segment;
  uint64_t size = 0;
};

struct ExportSpec {
  std::string name;
  uint64_t buffer_id = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
  uint64_t ttl_ms = 0;
  bool allow_read = false;
  bool allow_write = false;
  std::vector<std::string> allowed_peers;
};

struct ResolveInfo {
  uint64_t handle = 0;
  uint64_t length = 0;
  bool allow_read = false;
  bool allow_write = false;
};

// What an export grants a peer that resolved it (PeerService converts it
// to the peer protocol's reply).
struct PeerGrant {
  uint64_t export_id = 0;
  uint64_t length = 0;
  bool allow_read = false;
  bool allow_write = false;
  using Piece = RemotePiece;
  std::vector<Piece> pieces;              // offset order, covering [0, length)
  std::optional<uint64_t> expires_in_ms;  // with a TTL; at least 1
  // The same, as each link device reaches them: "tcp" and each RDMA
  // device's name (the one asked for is `pieces`).
  std::map<std::string, std::vector<Piece>> keys;
};

class Engine {
 public:
  // One device per transport. Loop (required) carries transfers between
  // sessions here; tcp carries links to peers, null when peering is off.
  // The verbs entry is unused: RDMA devices come as `rdma`.
  using Devices = std::array<std::unique_ptr<driver::Device>, kTransportCount>;
  // An RDMA device port the daemon opened: a verbs rail of every link.
  struct RdmaPort {
    std::unique_ptr<driver::Device> device;
    LocalVerbsInfo info;
  };
  // `rdma`: at most kMaxRdmaPorts; the first is the one links with
  // transport "verbs" start on. `no_rdma` says why there is none.
  Engine(Options options, Devices devices, std::vector<RdmaPort> rdma = {},
         std::string no_rdma = "no RDMA device was opened");
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Connects the loop channel and starts the thread.
  Status Start();
  // Stops the thread; closes every session. Idempotent.
  void Stop() MCDMA_EXCLUDES(cmd_mu_);

  // Runs fn on the engine thread and returns its result; nullopt when the
  // engine has stopped. Any thread but the engine's.
  template <typename F>
  auto Run(F&& fn) -> std::optional<std::invoke_result_t<F>> {
    using R = std::invoke_result_t<F>;
    auto task = std::make_shared<std::packaged_task<R()>>(std::forward<F>(fn));
    auto future = task->get_future();
    if (!Post([task] { (*task)(); })) return std::nullopt;
    return future.get();
  }
  // Heartbeat: increments every loop round (the watchdog checks it moves).
  uint64_t rounds() const { return rounds_.load(std::memory_order_relaxed); }

  // ---- Engine thread only (call through Run) ----
  Result<OpenedInfo> OpenSession(const HelloInfo& hello);
  void SetStreamCanceller(uint64_t session, std::function<void()> cancel);
  // Reaps a session: fails its callers' calls, revokes its exports, drops its
  // buffers once in-flight transfers are done. `reason` is left in the
  // mailbox header for the app.
  void CloseSession(uint64_t session, Code reason);
  Status CheckToken(uint64_t session, const std::string& token) const;
  Status Mapped(uint64_t session, const std::string& segment);
  Result<AllocInfo> Alloc(uint64_t session, uint64_t size);
  Status Free(uint64_t session, uint64_t buffer_id);
  Result<uint64_t> Export(uint64_t session, const ExportSpec& spec);
  Status Unexport(uint64_t session, const std::string& name);
  Result<ResolveInfo> Resolve(uint64_t session, const std::string& peer, const std::string& name);
  Status ReleaseHandle(uint64_t session, uint64_t handle);
  Result<uint64_t> Serve(uint64_t session, const std::string& service);
  Status Unserve(uint64_t session, uint64_t service_id);
  Result<uint64_t> LookupService(uint64_t session, const std::string& peer,
                                 const std::string& service);

  // ---- Links (engine_link.cpp, engine_peer.cpp); engine thread only ----
  // `transport`: tcp or verbs.
  Result<std::unique_ptr<driver::Endpoint>> CreateLinkEndpoint(Transport transport);
  bool has_verbs() const { return !rdma_.empty(); }
  // Fixed after construction: readable from any thread. The first RDMA
  // device port (or, when there is none, why), and all of them.
  const LocalVerbsInfo& verbs_info() const { return verbs_info_; }
  const std::vector<LocalVerbsInfo>& rdma_ports() const { return rdma_infos_; }
  // The device of an RDMA port (its slot), for status displays and port
  // watches from any thread: the devices outlive every caller (the engine
  // is stopped last). Null for a slot that is no RDMA port.
  driver::Device* rdma_device(uint8_t slot) const {
    size_t k = slot - size_t{kFirstRdmaSlot};
    return slot >= kFirstRdmaSlot && k < rdma_.size() ? rdma_[k].device.get() : nullptr;
  }
  // Takes over a connected link. An older link of the same (peer, origin) is
  // dropped first (its operations fail LINK_DOWN). Returns the link id.
  Result<uint64_t> InstallLink(const LinkSpec& spec, std::unique_ptr<driver::Connection> conn);
  // Drops a link: its in-flight operations fail with `code`. No-op if gone.
  void DropLink(uint64_t link_id, Code code, const std::string& why);
  // ---- Rails (engine_rails.cpp) ----
  // A tcp endpoint for a rail on this host's rail address `local_address`
  // (the probe: its connection either comes up within `timeout` or the pair
  // is no rail). kInvalid for an address that is not one of this host's
  // rails.
  Result<std::unique_ptr<driver::Endpoint>> CreateRailEndpoint(const std::string& local_address,
                                                               std::chrono::milliseconds timeout);
  // A verbs endpoint on the RDMA port of `slot` (a rail of that device).
  Result<std::unique_ptr<driver::Endpoint>> CreateRdmaEndpoint(uint8_t slot);
  // Adds (or replaces) rail spec.index of link `link_id` with a connected
  // connection; LINK_DOWN when the link is gone.
  Status AddRail(uint64_t link_id, const RailSpec& spec, std::unique_ptr<driver::Connection> conn);
  // Takes rail `index` of `link_id` out (its interface went down): its
  // unfinished slices and unacknowledged messages go to the other rails.
  void TakeRailDown(uint64_t link_id, uint32_t index, const std::string& why);
  // Takes out every rail with work posted and nothing completed for
  // `stalled_after` while another rail of its link is up (a path that
  // broke without its interface going down). Returns how many.
  size_t TakeStalledRailsDown(std::chrono::milliseconds stalled_after);
  // Called (on the engine thread) when a rail of a live link went down.
  // `never_up`: it failed its probe (the pair does not reach).
  void SetRailDownHandler(
      std::function<void(uint64_t link_id, uint32_t index, const std::string& why, bool never_up)>
          fn) {
    on_rail_down_ = std::move(fn);
  }
  // ---- Routes (engine_routes.cpp) ----
  // The route to a host without a link of its own: the neighbour its
  // messages go to first, the hosts on the way, and the instance of its
  // daemon as the fabric last saw it ("" when unknown).
  struct Route {
    std::string next_hop;
    std::vector<std::string> hops;
    std::string instance;
  };
  // Replaces the routes (and says which instance this daemon is). A routed
  // link whose next hop changed sends its unacknowledged messages again
  // over the new one; one whose peer restarted fails PEER_GONE.
  void SetRoutes(std::string self_instance, std::map<std::string, Route> routes);
  // The link traffic to `peer` takes: its own, else a routed one (made at
  // first use); LINK_DOWN when there is neither.
  Result<EngineLink*> RouteTo(const std::string& peer);
  struct RoutedLookup {
    uint64_t service_id = 0;
    std::string instance;  // the answering daemon's
  };
  // Looks `service` up on `peer` over its routed link; `done` runs once on
  // the engine thread (LINK_DOWN if the link goes down first).
  Status StartRoutedLookup(const std::string& peer, const std::string& service,
                           std::function<void(Result<RoutedLookup>)> done);
  // Resolves export `name` on `peer` over its routed link (the export must
  // be granted to this host); `done` runs once on the engine thread with
  // the export as a peer export to hand to AddPeerHandle.
  Status StartRoutedResolve(const std::string& peer, const std::string& name,
                            std::function<void(Result<PeerExport>)> done);
  RelayStats relay_stats();
  // Drops every link to `peer` (Goodbye, removal).
  void DropPeer(const std::string& peer, Code code, const std::string& why);
  // Called (on the engine thread) when the data path drops a link by itself.
  void SetLinkDownHandler(std::function<void(uint64_t link_id, const std::string& why)> fn) {
    on_link_down_ = std::move(fn);
  }
  std::vector<LinkSnapshot> Links() const;
  // Traced calls (engine/trace_log.hpp): the newest `max` (0: all) of
  // `session` (0: every session); `clear` empties the log after.
  std::vector<TraceRecord> TraceNow(uint64_t session, size_t max, bool clear);
  uint64_t traces_recorded() const { return traces_.recorded(); }
  // Sends `payload` to `peer` as an echo request; `done` runs on the engine
  // thread with the echoed bytes and the round trip the engine saw (from
  // handing it to the link to dispatching the answer), or an error (link
  // down). Returns the sequence number, for CancelEcho.
  Result<uint64_t> StartEcho(
      const std::string& peer, std::string payload,
      std::function<void(Result<std::string>, std::chrono::nanoseconds)> done,
      LinkSnapshot* used = nullptr);
  void CancelEcho(uint64_t seq);
  // `count` echoes of `bytes` random bytes to `peer`, each sent as soon as
  // the one before came back (mcdmactl link test: the two daemons' data
  // path with nothing between the round trips), each answer compared byte
  // for byte. `done` runs on the engine thread once: the round trips, or
  // the first error (LINK_DOWN, INTERNAL "echo mismatch ...", TIMEOUT when
  // one round trip takes longer than link_timeout_ms). CancelEchoes
  // with the returned id stops a series (its `done` then never runs).
  struct EchoSeries {
    std::vector<std::chrono::nanoseconds> rtt;
    LinkSnapshot used;
  };
  Result<uint64_t> StartEchoes(const std::string& peer, uint32_t bytes, uint32_t count,
                               std::function<void(Result<EchoSeries>)> done);
  void CancelEchoes(uint64_t series);
  // Ends with TIMEOUT each series whose echo in flight is older than
  // link_timeout_ms (Sweep).
  void ExpireEchoes(Clock::time_point now);
  // Peer plane, callee side: an app's export / service for `peer_host`,
  // registered with the device of `transport` ("tcp" or "verbs").
  Result<PeerGrant> ResolveForPeer(const std::string& peer_host, const std::string& name,
                                   Transport transport);
  Result<uint64_t> LookupForPeer(const std::string& service) const;
  // Peer plane, caller side: records what a peer answered for a session.
  Result<ResolveInfo> AddPeerHandle(uint64_t session, PeerExport peer_export);
  Result<uint64_t> AddPeerService(uint64_t session, PeerService service);

  // engine_admin.cpp: snapshots for the Admin service.
  StatusSnapshot StatusNow() const;
  std::vector<SessionSnapshot> SessionsNow() const;
  std::vector<ExportSnapshot> ExportsNow() const;
  std::vector<BufferSnapshot> BuffersNow() const;

  // Draining: refuse new sessions; Idle() says when nothing is in flight.
  void BeginDrain() { draining_ = true; }
  bool draining() const { return draining_; }
  bool Idle() const { return calls_.empty() && transfers_.empty(); }
  void CloseAllSessions(Code reason);

  const Options& options() const { return options_; }

 private:
  bool Post(std::function<void()> fn) MCDMA_EXCLUDES(cmd_mu_);
  void Loop();
  bool RunCommands() MCDMA_EXCLUDES(cmd_mu_);
  void Sleep();
  bool HasWork() MCDMA_EXCLUDES(cmd_mu_);
  // Arms every live rail's wake-up (Connection::ArmWakeup); false when one
  // already has something to poll.
  bool ArmLinks();
  // Whether link messages were posted or completed within LinkPollWindow():
  // the engine then keeps polling rather than sleeping.
  bool LinkHot(Clock::time_point now) const { return now - link_active_at_ < LinkPollWindow(); }
  // link_poll_us, or longer where messages have come in at short intervals
  // (a ping-pong: the next one is due within about one interval):
  // twice their average interval when that is at most half of
  // link_poll_max_us.
  Clock::duration LinkPollWindow() const {
    const auto floor = std::chrono::microseconds(options_.link_poll_us);
    if (options_.link_poll_us == 0) return floor;
    return std::max<Clock::duration>(
        floor, message_gap_.Budget(std::chrono::microseconds(0),
                                   std::chrono::microseconds(options_.link_poll_max_us)));
  }
  // Whether traffic on `r` keeps the engine polling (LinkHot): over RDMA,
  // whose completions the engine reaps itself; not over tcp, whose thread
  // rings the engine anyway; not over a software RDMA device unless
  // poll_software_rdma.
  bool PollsRail(const Rail& r) const {
    const auto& caps = r.conn->caps();
    return caps.polled_completions && (!caps.software || options_.poll_software_rdma != 0);
  }
  // A message came in over a link (not a one-sided completion).
  void NoteMessageIn(Clock::time_point now) {
    if (last_message_in_ != Clock::time_point{}) message_gap_.Observe(now - last_message_in_);
    last_message_in_ = now;
    link_active_at_ = now;
  }

  // engine_submit.cpp: one submission ring batch and each opcode.
  bool ProcessSubmissions(Session& s);
  void Handle(Session& s, const shm::SubmitDesc& d, uint32_t index);
  void HandleRelease(Session& s, const shm::SubmitDesc& d);
  // `reason` goes in the event's `detail` (protocol §10.1).
  void Complete(Session& s, shm::Op op, uint64_t tag, Code code, std::string_view message,
                uint64_t bytes = 0, std::span<const std::byte> payload = {},
                Reason reason = Reason::kNone,
                std::optional<Clock::time_point> started = std::nullopt);
  // Counts one finished operation: ok/failed, bytes, its code and its
  // latency since `started` (nullopt: the descriptor being handled now).
  void CountDone(shm::Op op, Code code, uint64_t bytes,
                 std::optional<Clock::time_point> started = std::nullopt);
  // A malformed descriptor (bad opcode, range, id): completes with `code`
  // and counts as an invalid descriptor.
  void Reject(Session& s, const shm::SubmitDesc& d, Code code, const std::string& message);
  // A well-formed request that cannot be carried out (service gone, export
  // revoked, call expired, busy, draining): completes with `code` only.
  void Decline(Session& s, const shm::SubmitDesc& d, Code code, const std::string& message);
  // The same with a Status's code, reason and message.
  void Decline(Session& s, const shm::SubmitDesc& d, const Status& why);
  void RingFault(Session& s, const std::string& message);
  // Ends a misbehaving session: marks its mailbox closed and cancels its
  // stream; the stream's handler then reaps it through CloseSession.
  void Evict(Session& s, Code reason, const std::string& message);
  Clock::time_point DeadlineFor(const shm::SubmitDesc& d) const;

  // engine_transfer.cpp: READ/WRITE through the transport.
  void HandleTransfer(Session& s, const shm::SubmitDesc& d);
  void HandlePeerTransfer(Session& s, const shm::SubmitDesc& d,
                          const std::shared_ptr<BufferRecord>& buf,
                          const std::shared_ptr<PeerExport>& target);
  // Whether a peer's export takes this transfer now: not expired or
  // revoked, the access granted, the range inside it. Completes `d` if not.
  bool PeerExportAllows(Session& s, const shm::SubmitDesc& d, PeerExport& target);
  // The link a transfer to `target` goes over: up, to the peer instance it
  // was resolved from, on the transport it was resolved for. Null (and `d`
  // completed) if there is none.
  EngineLink* LinkForPeerExport(Session& s, const shm::SubmitDesc& d, const PeerExport& target);
  // Registers `buf` with the link's device at its first use there (verbs).
  // False (and `d` completed) when the buffer cannot go over the link.
  bool ReadyForLink(Session& s, const shm::SubmitDesc& d, BufferRecord& buf, EngineLink& l);
  bool ProgressTransfers();
  bool PostTransferPieces(TransferOp& op);
  // Posts what a transfer over a link may post now, slice by slice on the
  // rails PickRail chooses.
  bool PostLinkPieces(TransferOp& op, EngineLink& link);
  // A completion of the loop channel (rail == nullptr) or of a rail.
  void OnTransferCompletion(const driver::WorkCompletion& wc, EngineLink* link, Rail* rail);
  void FinishTransfer(TransferOp& op);

  // engine_link.cpp: the data path of links.
  bool ProgressLinks();
  EngineLink* LinkTo(const std::string& peer);
  EngineLink* FindLink(uint64_t id);
  void SendMessage(EngineLink& l, link_wire::Header h, std::span<const std::byte> payload);
  // `timed`: a traced call's answer carries the times of this host's part
  // (link_wire::kTraceBit): ns from the call received to now, ns the app had it.
  void SendReply(uint64_t link_id, uint64_t id, Code code, std::span<const std::byte> payload,
                 Reason reason = Reason::kNone,
                 std::optional<std::pair<uint64_t, uint64_t>> timed = std::nullopt);
  // A traced call's message was wholly posted.
  void NoteTracePosted(uint64_t call_id);
  bool PumpBacklog(EngineLink& l);
  bool PostFragments(EngineLink& l, Rail& r, EngineLink::Outgoing& m);
  // Posts a header-only message (a rail probe or its answer) on `r`
  // outside the link's sequence; false when no send slot is free.
  bool PostBare(EngineLink& l, Rail& r, link_wire::MsgType type);
  // Answers owed probes, fails rails whose probe went unanswered.
  void ProgressProbes(EngineLink& l, Clock::time_point now);
  // A probe or its answer received on `r`; false for any other message.
  bool OnRailProbe(EngineLink& l, Rail& r, const link_wire::Header& h);
  // The local registration of `buf` with the device of `r`, made at its
  // first use there; null (with `why`) when the device refuses it.
  const Registration* LocalRegFor(BufferRecord& buf, const Rail& r, std::string* why);
  void FailLink(EngineLink& l, Code code, const std::string& why);
  void OnFragment(EngineLink& l, Rail& r, uint32_t slot, uint32_t len);
  // A whole message: its ack, then in sequence order to Dispatch.
  void Deliver(EngineLink& l, const link_wire::Header& h, std::span<const std::byte> payload);
  void ProcessAck(EngineLink& l, uint64_t ack);
  // Polls one rail; true if it had anything.
  bool ProgressRail(EngineLink& l, Rail& r);
  // engine_rails.cpp
  // Slots, their registration and posted receives for a connected rail.
  Status SetUpRail(Rail& r, uint32_t peer_slot_bytes);
  // Drops the failed rails of `l`; the link fails when none is left up.
  // Each dropped rail is reported to on_rail_down_ (which takes the link
  // manager's lock: never called from AddRail, which runs under it).
  void DropFailedRails(EngineLink& l);
  // Takes a failed rail out: its slices and unacknowledged messages go to
  // the other rails, its connection is reset.
  void RetireRail(EngineLink& l, Rail& r);
  // The rail messages go on now; nullptr when none is up.
  Rail* MessageRail(EngineLink& l);
  // The rail for the next slice of `op` (bytes long); nullptr when every
  // eligible rail is full.
  Rail* PickRail(EngineLink& l, const TransferOp& op, uint64_t bytes);
  std::vector<RailSnapshot> RailSnapshots(const EngineLink& l) const;
  void Dispatch(EngineLink& l, const link_wire::Header& h, std::span<const std::byte> payload);

  // engine_routes.cpp: routed links and relaying.
  // The routed link to `peer` (made if none); null while one is being
  // reset. A link for another instance of the peer is dropped first.
  EngineLink* RoutedLinkTo(const std::string& peer, const std::string& peer_instance);
  // `peer`'s link of its own that is not failed, or null.
  EngineLink* DirectLinkTo(const std::string& peer);
  // Wraps a routed link's backlog into envelopes on its next hop's link.
  bool PumpRouted(EngineLink& l);
  // Its unacknowledged messages go again (route change, no ack).
  void ResendRouted(EngineLink& l, const char* why);
  // An ack of `ack` came: the round-trip estimate and the resend timer.
  static void NoteRoutedAck(EngineLink& l, uint64_t ack, Clock::time_point now);
  static Clock::duration RoutedResendTimeout(const EngineLink& l);
  // Timers of a routed link: no route, no ack, resends, acks owed.
  void ProgressRouted(EngineLink& l, Clock::time_point now);
  // A kRouted envelope arrived on `from`: delivered here or forwarded.
  void OnRouted(EngineLink& from, std::span<const std::byte> payload);
  void OnLookup(EngineLink& l, const link_wire::Header& h, std::span<const std::byte> payload);
  void OnLookupReply(EngineLink& l, const link_wire::Header& h, std::span<const std::byte> payload);
  // Fails the lookups and resolutions waiting on a link that went down.
  void CancelRoutedLookup(uint64_t link_id);

  // engine_routed_transfer.cpp: READ/WRITE over a routed link, in pieces
  // that are routed messages; the far end applies them to its export.
  bool PostRoutedPieces(TransferOp& op, EngineLink& link);
  void OnResolve(EngineLink& l, const link_wire::Header& h, std::span<const std::byte> payload);
  void OnResolveReply(EngineLink& l, const link_wire::Header& h,
                      std::span<const std::byte> payload);
  void OnPiece(EngineLink& l, const link_wire::Header& h, std::span<const std::byte> payload);
  void OnPieceReply(EngineLink& l, const link_wire::Header& h, std::span<const std::byte> payload);
  // The export a routed piece names, if `origin` may access it as asked;
  // else the error to answer.
  Result<ExportRecord*> ExportForPiece(const std::string& origin, uint64_t export_id,
                                       const route_wire::PieceHead& piece);

  // engine_calls.cpp: calls, one path whoever the caller and the server.
  void HandleCall(Session& s, const shm::SubmitDesc& d, bool one_way);
  void HandlePeerCall(Session& s, const shm::SubmitDesc& d, bool one_way, const PeerService& ps);
  void OnIncomingCall(EngineLink& l, const link_wire::Header& h,
                      std::span<const std::byte> payload);
  // Offers a call to a service of this host: posts it to the serving app's
  // inbox and books it (not a one-way one). Returns the call id (0 for a
  // one-way call), or why the call cannot be delivered.
  Result<uint64_t> OfferToService(const CallCaller& caller, uint64_t service_id,
                                  std::span<const std::byte> payload, Clock::time_point deadline,
                                  uint32_t timeout_us, bool one_way);
  void HandleReply(Session& s, const shm::SubmitDesc& d);
  void OnReply(EngineLink& l, const link_wire::Header& h, std::span<const std::byte> payload);
  // Gives a taken call's outcome to its caller (a completion for an app
  // here, a kReply for a peer). An error's payload is its message. Returns
  // why the outcome did not fit the way back (the caller is told that).
  Status AnswerCaller(const PendingCall& call, Code code, std::span<const std::byte> payload,
                      Reason reason = Reason::kNone);
  void FailCall(uint64_t call_id, Code code, const std::string& message);
  // A traced call's answer came back over `l`: its record (traces_).
  void RecordTrace(const EngineLink& l, const link_wire::Header& h, const PendingCall& call,
                   Code code, uint64_t reply_bytes, Clock::time_point replied);

  void ExpireDeadlines(Clock::time_point now);
  void Sweep(Clock::time_point now);
  void RemoveExport(const std::string& name, Code reason);
  // Sends the kRevokeAcks whose transfers have drained.
  bool SendRevokeAcks();
  Session* FindSession(uint64_t id);
  // Session::Post within limits.max_backlog* (the daemon-wide byte room is
  // what backlog_held_ leaves), keeping backlog_held_ current: O(1), it
  // runs for every completion.
  bool PostTo(Session& s, bool inbox, const shm::EventDesc& ev, std::span<const std::byte> payload);
  Status CheckNameOwner(const Session& s, const std::string& name, const char* what) const;

  Options options_;
  // The first characters of every segment name (SegmentTag of the socket),
  // so that the next daemon on this socket can remove what this one leaves.
  std::string segment_tag_;
  Devices devices_;
  std::vector<RdmaPort> rdma_;
  std::vector<LocalVerbsInfo> rdma_infos_;
  // The device of a transport (verbs: the first RDMA port), or of a slot.
  driver::Device* device(Transport t) const {
    return t == Transport::kVerbs ? rdma_device(kFirstRdmaSlot)
                                  : devices_[static_cast<size_t>(t)].get();
  }
  driver::Device* device_at(uint8_t slot) const {
    return slot == kLoopSlot  ? device(Transport::kLoop)
           : slot == kTcpSlot ? device(Transport::kTcp)
                              : rdma_device(slot);
  }
  // The loop channel: local one-sided transfers are posted on `local_` and
  // name the target's registration as remote memory, exactly as a transfer
  // to a peer names the peer's. `local_peer_` is the other end.
  std::unique_ptr<driver::Connection> local_;
  std::unique_ptr<driver::Connection> local_peer_;
  LocalVerbsInfo verbs_info_;
  LinkTable links_;
  std::atomic<bool> link_pending_{false};  // set by the link transport's thread
  // The last message posted on a link or message completion reaped from
  // one (LinkHot); one-sided transfers' completions do not count.
  Clock::time_point link_active_at_{};
  // Intervals between messages coming in over links (LinkPollWindow).
  wait::WaitEstimate message_gap_;
  Clock::time_point last_message_in_{};
  // Echo series in progress (StartEchoes), by id.
  struct EchoRun;
  std::map<uint64_t, std::shared_ptr<EchoRun>> echo_runs_;
  std::function<void(uint64_t, const std::string&)> on_link_down_;
  std::function<void(uint64_t, uint32_t, const std::string&, bool)> on_rail_down_;
  std::unordered_map<uint64_t, PeerService> peer_services_;  // by local service id
  // Routes (engine_routes.cpp).
  std::string instance_;  // this daemon's instance id (for envelopes)
  std::map<std::string, Route> routes_;
  struct LookupWaiter {
    uint64_t link = 0;
    std::function<void(Result<RoutedLookup>)> done;
  };
  std::unordered_map<uint64_t, LookupWaiter> lookups_;
  struct ResolveWaiter {
    uint64_t link = 0;
    std::string name;
    std::function<void(Result<PeerExport>)> done;
  };
  std::unordered_map<uint64_t, ResolveWaiter> resolves_;
  struct RelayCounters {
    uint64_t forwarded = 0;
    uint64_t forwarded_bytes = 0;
    uint64_t delivered = 0;
    uint64_t hop_limit = 0;
    uint64_t no_route = 0;
    uint64_t full = 0;
    uint64_t stale = 0;
    uint64_t refused = 0;
    uint64_t looped = 0;
    Clock::time_point last_log{};
  } relay_;

  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> rounds_{0};
  bool draining_ = false;

  // Commands from other threads (Run), queued under cmd_mu_.
  Mutex cmd_mu_;
  std::deque<std::function<void()>> commands_ MCDMA_GUARDED_BY(cmd_mu_);
  bool accepting_ MCDMA_GUARDED_BY(cmd_mu_) = true;
  shm::Bell cmd_bell_{};  // private futex: wakes the engine for commands

  // Everything below: engine thread only.
  Clock::time_point started_;
  uint64_t next_id_ = 1;
  SessionTable sessions_;
  Registry registry_;
  TraceLog traces_;
  CallTable calls_;
  TransferTable transfers_;
  UserTable users_;
  uint64_t backlog_held_ = 0;  // payload bytes in every session's backlog
  void UnlinkSegment(const std::string& name);
  // Unlinks `segment`'s name; a failure is logged and counted
  // (segment_unlink_failures in status), never fatal: the mapping stays.
  void UnlinkOrCount(ShmSegment& segment);
  Clock::time_point last_sweep_;

  OpCounters op_stats_{};
  Clock::time_point handling_since_{};
  // While HandleReply answers a traced call: when the app's REPLY was
  // taken (steady ns), for the times AnswerCaller sends back; 0 otherwise.
  uint64_t answer_taken_ns_ = 0;  // when Handle() took the current descriptor
  uint64_t invalid_total_ = 0;
  uint64_t segment_unlink_failures_ = 0;
};

}  // namespace mcdma::daemon
