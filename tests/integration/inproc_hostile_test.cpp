// A hostile or unlucky app against the in-process daemon: running it out of
// file descriptors, filling an inbox it never reads, taking every session
// slot, asking for more shared memory than /dev/shm has, squatting reserved
// names, a TTL meant as "never". Each time the attacker gets a named error
// and a well-behaved session keeps working.
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "inproc_daemon.hpp"
#include "platform/process.hpp"
#include "platform/shm.hpp"
#include "platform/socket.hpp"
#include "raw_session.hpp"

namespace mcdma::itest {
namespace {

using std::chrono::milliseconds;

// A raw connection to the control socket (what a hostile app can open
// without ever speaking gRPC); -1 with errno when socket/connect fail.
int RawConnect(const std::string& path) {
  auto opened = platform::OpenSocket(AF_UNIX, SOCK_STREAM, 0, platform::Blocking::kBlocking);
  if (!opened.ok()) return -1;
  int fd = opened->Release();
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    int err = errno;
    close(fd);
    errno = err;
    return -1;
  }
  return fd;
}

const v1::ListenerInfo* FindListener(const v1::StatusReply& s, const std::string& name) {
  for (const auto& l : s.budgets().listeners()) {
    if (l.name() == name) return &l;
  }
  return nullptr;
}

// Restores RLIMIT_NOFILE when the test ends.
class FileLimit {
 public:
  explicit FileLimit(rlim_t soft) {
    getrlimit(RLIMIT_NOFILE, &saved_);
    rlimit lowered = saved_;
    lowered.rlim_cur = soft;
    ok_ = setrlimit(RLIMIT_NOFILE, &lowered) == 0;
  }
  ~FileLimit() { setrlimit(RLIMIT_NOFILE, &saved_); }
  bool ok() const { return ok_; }

 private:
  rlimit saved_{};
  bool ok_ = false;
};

class InprocHostile : public InprocDaemonTest {
 protected:
  void Configure(daemon::Options& o) const override {
    o.per_user_sessions = 6;
    o.max_backlog_bytes = 4 << 20;
    o.arena_bytes = 1 << 20;
    o.max_buffer_bytes = uint64_t{1} << 46;
    o.per_user_bytes = uint64_t{1} << 50;
    o.max_connections = 64;
    o.max_connections_per_user = 16;
    o.reservations = {{"kv.", getuid() + 1}, {"kv.mine.", getuid()}};
  }
};

TEST_F(InprocHostile, BuffersKeepNoFileDescriptorOpen) {
  Client* app = Connect("many-buffers");
  ASSERT_NE(app, nullptr);
  int64_t before = platform::OpenFileCount();
  ASSERT_GT(before, 0);
  std::vector<Buffer> buffers;
  for (int i = 0; i < 400; ++i) {
    auto b = app->Alloc(4096);
    ASSERT_TRUE(b.ok()) << i << ": " << b.status().ToString();
    buffers.push_back(std::move(b).value());
  }
  // Neither the daemon nor the app keeps a descriptor per mapped buffer
  // (before: one each, and 2,000 buffers exhausted a 2,048 limit).
  EXPECT_LT(platform::OpenFileCount() - before, 40);
}

TEST_F(InprocHostile, ControlSocketAcceptsAgainAfterTheDaemonRanOutOfFiles) {
  Client* bystander = Connect("bystander");
  ASSERT_NE(bystander, nullptr);
  std::vector<int> held;
  {
    // The daemon runs in this process: both ends of every connection count
    // against one limit, a little above what is open now.
    FileLimit limit(static_cast<rlim_t>(platform::OpenFileCount() + 60));
    ASSERT_TRUE(limit.ok());
    for (int i = 0; i < 200; ++i) {
      int fd = RawConnect(socket());
      if (fd < 0) break;
      held.push_back(fd);
    }
    std::this_thread::sleep_for(milliseconds(300));
    for (int fd : held) close(fd);
    held.clear();
    std::this_thread::sleep_for(milliseconds(1200));  // the listener's sweep
  }
  // gRPC's own listener never accepted again after one EMFILE; this one
  // does, and the session that was open all along still works.
  auto status = AdminStatus();
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  const v1::ListenerInfo* control = FindListener(*status, "control");
  ASSERT_NE(control, nullptr);
  EXPECT_GT(control->refused_per_source() + control->shed_out_of_files() + control->refused_limit(),
            0u)
      << "the flood was neither capped nor shed";
  Client* late = Connect("after-the-flood");
  ASSERT_NE(late, nullptr);
  ASSERT_TRUE(bystander->Serve("echo", [](ServerCall& c) { (void)c.Reply(c.view()); }).ok());
  auto reply = late->Call("echo", std::string_view("still here"));
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->view(), std::string_view("still here"));
}

TEST_F(InprocHostile, OneUserCannotHoldMoreThanItsControlConnections) {
  std::vector<int> held;
  for (int i = 0; i < 40; ++i) {
    int fd = RawConnect(socket());
    ASSERT_GE(fd, 0);
    held.push_back(fd);
  }
  std::this_thread::sleep_for(milliseconds(300));
  // Over max_connections_per_user (16), connections were closed at once:
  // reading them says EOF.
  int closed = 0;
  for (int fd : held) {
    char byte = 0;
    timeval tv{0, 200'000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (recv(fd, &byte, 1, 0) == 0) ++closed;
  }
  EXPECT_GE(closed, 40 - 16);
  for (int fd : held) close(fd);
  std::this_thread::sleep_for(milliseconds(1200));  // the listener's sweep
  auto status = AdminStatus();
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  const v1::ListenerInfo* control = FindListener(*status, "control");
  ASSERT_NE(control, nullptr);
  EXPECT_EQ(control->max_per_source(), 16u);
  EXPECT_GE(control->refused_per_source(), 24u);
}

TEST_F(InprocHostile, AnInboxNobodyReadsIsCappedInBytesAndTheSenderIsTold) {
  Client* hog = Connect("never-reads");
  Client* sender = Connect("sender");
  Client* bystander = Connect("bystander");
  ASSERT_NE(hog, nullptr);
  ASSERT_NE(sender, nullptr);
  ASSERT_NE(bystander, nullptr);
  // The handler never returns until the end: the hog's progress thread is
  // stuck and nothing drains its inbox. (Shared: the handler runs again for
  // each queued notification after the test body has returned.)
  struct Gate {
    std::mutex mu;
    std::condition_variable cv;
    bool open = false;
  };
  auto gate = std::make_shared<Gate>();
  Handler stuck = [gate](ServerCall&) {
    std::unique_lock lock(gate->mu);
    gate->cv.wait(lock, [&] { return gate->open; });
  };
  ASSERT_TRUE(hog->Serve("sink", stuck).ok());
  ASSERT_TRUE(bystander->Serve("echo", [](ServerCall& c) { (void)c.Reply(c.view()); }).ok());
  std::vector<std::byte> big(256 << 10, std::byte{0x5a});
  Status last;
  int sent = 0;
  for (; sent < 200; ++sent) {
    last = sender->Notify("sink", big);
    if (!last.ok()) break;
  }
  // 1 MiB arena half + 4 MiB backlog: about 20 of 256 KiB fit, never 200.
  EXPECT_LT(sent, 60);
  EXPECT_EQ(last.code(), Code::kBusy) << last.ToString();
  EXPECT_EQ(last.reason(), Reason::kBacklogFull) << last.ToString();
  auto status = AdminStatus();
  ASSERT_TRUE(status.ok());
  EXPECT_LE(status->budgets().backlog_bytes(), 4u << 20);
  EXPECT_EQ(status->budgets().max_backlog_bytes(), 4u << 20);
  // Everyone else is served.
  auto reply = sender->Call("echo", std::string_view("ping"));
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  {
    std::lock_guard lock(gate->mu);
    gate->open = true;
  }
  gate->cv.notify_all();
}

TEST_F(InprocHostile, OneUserCannotTakeEverySessionSlot) {
  std::vector<Client*> mine;
  for (int i = 0; i < 6; ++i) {
    Client* c = Connect("slot-" + std::to_string(i));
    ASSERT_NE(c, nullptr);
    mine.push_back(c);
  }
  ClientOptions opts;
  opts.socket = socket();
  opts.app_name = "one-too-many";
  auto extra = Client::Connect(opts);
  ASSERT_FALSE(extra.ok());
  EXPECT_EQ(extra.status().code(), Code::kBusy) << extra.status().ToString();
  EXPECT_EQ(extra.status().reason(), Reason::kUserQuota) << extra.status().ToString();
  auto status = AdminStatus();
  ASSERT_TRUE(status.ok());
  ASSERT_EQ(status->budgets().users_size(), 1);
  EXPECT_EQ(status->budgets().users(0).uid(), getuid()) << "the kernel's uid, not Hello's";
  EXPECT_EQ(status->budgets().users(0).sessions(), 6u);
}

TEST_F(InprocHostile, AFullDevShmIsNoMemoryShmFullAndTheDaemonServesOn) {
  Client* app = Connect("greedy");
  ASSERT_NE(app, nullptr);
  uint64_t free_now = platform::SharedMemoryFree();
  ASSERT_GT(free_now, 0u) << "/dev/shm's size cannot be read";
  auto huge = app->Alloc(free_now + (uint64_t{1} << 30));
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), Code::kNoMemory) << huge.status().ToString();
  EXPECT_EQ(huge.status().reason(), Reason::kShmFull) << huge.status().ToString();
  auto small = app->Alloc(1 << 20);
  ASSERT_TRUE(small.ok()) << small.status().ToString();
  std::memset(small->data(), 1, small->size());
}

TEST_F(InprocHostile, ReservedNamesAreOnlyTheirUsers) {
  Client* app = Connect("squatter");
  ASSERT_NE(app, nullptr);
  auto taken = app->Serve("kv.req-1", [](ServerCall&) {});
  ASSERT_FALSE(taken.ok());
  EXPECT_EQ(taken.status().code(), Code::kPermissionDenied);
  EXPECT_EQ(taken.status().reason(), Reason::kNameReserved) << taken.status().ToString();
  auto buffer = app->Alloc(4096);
  ASSERT_TRUE(buffer.ok());
  Status exported = app->Export(*buffer, "kv.req-1.0");
  EXPECT_EQ(exported.reason(), Reason::kNameReserved) << exported.ToString();
  // The longest prefix decides: "kv.mine." is this user's.
  EXPECT_TRUE(app->Serve("kv.mine.req-1", [](ServerCall&) {}).ok());
  EXPECT_TRUE(app->Export(*buffer, "kv.mine.req-1.0").ok());
  // Unreserved names: first come, first served.
  EXPECT_TRUE(app->Serve("anything", [](ServerCall&) {}).ok());
}

TEST_F(InprocHostile, ATtlOfUint64MaxMeansNever) {
  Client* app = Connect("forever");
  ASSERT_NE(app, nullptr);
  auto buffer = app->Alloc(4096);
  ASSERT_TRUE(buffer.ok());
  ExportOptions forever;
  forever.ttl = milliseconds(std::numeric_limits<int64_t>::max());
  ASSERT_TRUE(app->Export(*buffer, "never-expires", forever).ok());
  std::this_thread::sleep_for(milliseconds(1500));
  auto remote = app->Resolve("never-expires");
  ASSERT_TRUE(remote.ok()) << "the TTL overflowed into the past: " << remote.status().ToString();
}

TEST_F(InprocHostile, TheSessionClosedLogCountsWhatWasReclaimed) {
  auto sink = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(64);
  auto engine_log = spdlog::get("engine");
  ASSERT_NE(engine_log, nullptr);
  engine_log->sinks().push_back(sink);
  const spdlog::level::level_enum level = engine_log->level();
  engine_log->set_level(spdlog::level::info);
  {
    // A session that ends without cleaning up (libmcdma unexports and frees
    // on Close; a crashed app does not): the stream just goes.
    std::string error;
    auto raw = RawSession::Open(socket(), &error);
    ASSERT_NE(raw, nullptr) << error;
    auto buffer = raw->Alloc(8192);
    ASSERT_TRUE(buffer.ok()) << buffer.status().ToString();
    ASSERT_TRUE(raw->Export(buffer->id, "left.0").ok());
    ASSERT_TRUE(raw->Export(buffer->id, "left.1").ok());
  }
  bool found = false;
  for (int i = 0; i < 100 && !found; ++i) {
    for (const std::string& line : sink->last_formatted()) {
      if (line.find(") closed (") == std::string::npos) continue;
      found = true;
      EXPECT_NE(line.find("1 buffers, 2 exports, 0 services reclaimed"), std::string::npos) << line;
    }
    std::this_thread::sleep_for(milliseconds(20));
  }
  engine_log->set_level(level);
  engine_log->sinks().pop_back();
  EXPECT_TRUE(found) << "no session-closed line";
}

}  // namespace
}  // namespace mcdma::itest
