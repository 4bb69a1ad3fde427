#include "engine/engine.hpp"

#include <spdlog/spdlog.h>

#include "budgets.hpp"
#include "mcdma_internal/wait.hpp"
#include "socket_path.hpp"

namespace mcdma::daemon {
namespace {
constexpr auto kSweepInterval = std::chrono::milliseconds(50);
constexpr auto kMaxSleep = std::chrono::milliseconds(100);
constexpr auto kBacklogPoll = std::chrono::milliseconds(1);
}  // namespace

Engine::Engine(Options options, Devices devices, std::vector<RdmaPort> rdma, std::string no_rdma)
    : options_(std::move(options)),
      segment_tag_(SegmentTag(options_.socket)),
      devices_(std::move(devices)),
      rdma_(std::move(rdma)),
      users_(UserBudget{
          options_.per_user_sessions, options_.per_user_buffers,
          options_.per_user_bytes != 0 ? options_.per_user_bytes : kDefaultPerUserBytes}) {
  if (rdma_.size() > kMaxRdmaPorts) rdma_.resize(kMaxRdmaPorts);  // Validate() allows no more
  for (size_t k = 0; k < rdma_.size(); ++k) {
    rdma_[k].info.slot = static_cast<uint8_t>(kFirstRdmaSlot + k);
    rdma_infos_.push_back(rdma_[k].info);
  }
  if (!rdma_infos_.empty()) {
    verbs_info_ = rdma_infos_.front();
  } else {
    verbs_info_.reason = std::move(no_rdma);
  }
  // The link transports progress on threads of their own and ring us when a
  // connection has something to reap.
  std::vector<driver::Device*> link_devices = {device(Transport::kTcp)};
  for (const RdmaPort& p : rdma_) link_devices.push_back(p.device.get());
  for (driver::Device* d : link_devices) {
    if (d == nullptr) continue;
    d->SetNotifier([this] {
      link_pending_.store(true);
      wait::Ring(cmd_bell_, /*shared=*/false);
    });
  }
}

Engine::~Engine() { Stop(); }

bool Engine::PostTo(Session& s, bool inbox, const shm::EventDesc& ev,
                    std::span<const std::byte> payload) {
  uint64_t total = options_.max_backlog_bytes_total;
  BacklogLimit limit{options_.max_backlog, options_.max_backlog_bytes,
                     total > backlog_held_ ? total - backlog_held_ : 0};
  uint64_t before = s.backlog_bytes();
  bool ok = s.Post(inbox, ev, payload, limit);
  backlog_held_ += s.backlog_bytes() - before;  // Post only adds
  return ok;
}

Status Engine::Start() {
  // The loop channel: two endpoints of the same device, connected to each other.
  driver::Device* loop = device(Transport::kLoop);
  if (loop == nullptr) return Status(Code::kInvalid, "the engine needs a loop device");
  MCDMA_ASSIGN_OR_RETURN(auto a, loop->CreateEndpoint());
  MCDMA_ASSIGN_OR_RETURN(auto b, loop->CreateEndpoint());
  std::string a_info = a->LocalInfo();
  std::string b_info = b->LocalInfo();
  MCDMA_ASSIGN_OR_RETURN(local_, a->Connect(b_info));
  MCDMA_ASSIGN_OR_RETURN(local_peer_, b->Connect(a_info));
  started_ = Clock::now();
  last_sweep_ = started_;
  thread_ = std::thread([this] { Loop(); });
  return Status::Ok();
}

void Engine::Stop() {
  {
    MutexLock lock(cmd_mu_);
    if (!accepting_ && !thread_.joinable()) return;
    accepting_ = false;
  }
  stop_.store(true);
  cmd_bell_.seq.fetch_add(1);
  wait::FutexWake(&cmd_bell_.seq, 1, false);
  if (thread_.joinable()) thread_.join();
  // Commands that raced with the stop: run them here so no caller waits
  // forever on a future (the engine thread is gone, this thread owns it now).
  std::deque<std::function<void()>> left;
  {
    MutexLock lock(cmd_mu_);
    left.swap(commands_);
  }
  for (auto& fn : left) fn();
  CloseAllSessions(Code::kUnavailable);
  while (!links_.empty())
    DropLink(links_.begin()->first, Code::kPeerGone, "the daemon is stopping");
  transfers_ = TransferTable();
  registry_.Clear();
  local_.reset();
  local_peer_.reset();
}

bool Engine::Post(std::function<void()> fn) {
  {
    MutexLock lock(cmd_mu_);
    if (!accepting_) return false;
    commands_.push_back(std::move(fn));
  }
  wait::Ring(cmd_bell_, /*shared=*/false);
  return true;
}

bool Engine::RunCommands() {
  std::deque<std::function<void()>> batch;
  {
    MutexLock lock(cmd_mu_);
    if (commands_.empty()) return false;
    batch.swap(commands_);
  }
  for (auto& fn : batch) fn();
  return true;
}

Session* Engine::FindSession(uint64_t id) { return sessions_.Find(id); }

void Engine::Loop() {
  wait::Backoff backoff(std::chrono::microseconds(options_.spin_budget_us));
  while (!stop_.load(std::memory_order_relaxed)) {
    rounds_.fetch_add(1, std::memory_order_relaxed);
    bool did = RunCommands();
    for (auto& [id, s] : sessions_) {
      if (s->backlog() > 0) {
        uint64_t before = s->backlog_bytes();
        did |= s->FlushBacklog();
        backlog_held_ -= before - s->backlog_bytes();  // flushing only removes
      }
      did |= ProcessSubmissions(*s);
    }
    did |= ProgressLinks();
    did |= ProgressTransfers();
    Clock::time_point now = Clock::now();
    ExpireDeadlines(now);
    if (now - last_sweep_ >= kSweepInterval) Sweep(now);
    if (did) {
      backoff.Reset();
      continue;
    }
    if (backoff.Spin()) continue;
    if (LinkHot(now)) {
      std::this_thread::yield();
      continue;
    }
    Sleep();
    backoff.Reset();
  }
}

bool Engine::HasWork() {
  {
    MutexLock lock(cmd_mu_);
    if (!commands_.empty()) return true;
  }
  // Local transfers progress only in Poll; a link's transfers progress on
  // the transport's thread, which rings us (link_pending_).
  // A link's backlog and blocked transfers wait for completions, which ring
  // us too.
  if (transfers_.AnyLocal()) return true;
  if (link_pending_.load()) return true;
  for (auto& [id, l] : links_) {
    if (l->failed) return true;
  }
  for (auto& [id, s] : sessions_) {
    auto n = s->Available();
    if (!n || *n > 0) return true;
  }
  return false;
}

void Engine::Sleep() {
  std::vector<wait::WaitTarget> targets;
  targets.reserve(sessions_.size() + 1);
  targets.push_back({&cmd_bell_.seq, wait::PrepareSleep(cmd_bell_), false});
  bool backlog = false;
  for (auto& [id, s] : sessions_) {
    if (targets.size() >= wait::kMaxWaitTargets) break;
    shm::Bell& bell = s->header()->daemon_bell;
    targets.push_back({&bell.seq, wait::PrepareSleep(bell), true});
    backlog |= s->backlog() > 0;
  }
  bool many = sessions_.size() + 1 > wait::kMaxWaitTargets;
  // After the bells: a completion that lands once a rail is armed rings
  // cmd_bell_, which is already marked sleeping.
  if (!ArmLinks()) link_pending_.store(true);
  if (!HasWork() && !stop_.load()) {
    Clock::time_point now = Clock::now();
    Clock::duration timeout = kMaxSleep;
    if (auto next = calls_.NextDeadline())
      timeout = std::min<Clock::duration>(timeout, *next - now);
    timeout = std::min<Clock::duration>(timeout, last_sweep_ + kSweepInterval - now);
    // Backlogged apps free ring space without ringing us; sessions beyond
    // the futex_waitv limit are looked at by polling.
    if (backlog || many) timeout = std::min<Clock::duration>(timeout, kBacklogPoll);
    if (timeout > Clock::duration::zero()) wait::FutexWaitMany(targets, timeout);
  }
  wait::CancelSleep(cmd_bell_);
  for (auto& [id, s] : sessions_) wait::CancelSleep(s->header()->daemon_bell);
}

bool Engine::ArmLinks() {
  bool quiet = true;
  for (auto& [id, l] : links_) {
    for (auto& r : l->rails) {
      if (r != nullptr && r->live() && !r->conn->ArmWakeup()) quiet = false;
    }
  }
  return quiet;
}

void Engine::ExpireDeadlines(Clock::time_point now) {
  for (auto& [id, call] : calls_.TakeExpired(now)) {
    (void)AnswerCaller(call, Code::kTimeout, AsBytes("no reply before the deadline"));
  }
  transfers_.ExpireDeadlines(now);
}

void Engine::Sweep(Clock::time_point now) {
  last_sweep_ = now;
  ExpireEchoes(now);
  for (const std::string& name : registry_.ExpiredExports(now)) {
    spdlog::get("engine")->info("export '{}' expired (TTL)", name);
    RemoveExport(name, Code::kRevoked);
  }
  for (auto [export_id, waiting] : registry_.ExpireDrains(now)) {
    spdlog::get("engine")->warn(
        "export {}: {} verbs peer(s) did not acknowledge its revocation; deregistering anyway",
        export_id, waiting);
  }
  auto attach = std::chrono::milliseconds(options_.attach_timeout_ms);
  for (const std::string& name : registry_.StaleSegments(now, attach)) {
    spdlog::get("engine")->warn("segment {} not mapped within {} ms; unlinking it", name,
                                options_.attach_timeout_ms);
    UnlinkSegment(name);
  }
}

}  // namespace mcdma::daemon
