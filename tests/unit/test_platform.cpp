// The platform seam as it runs on this OS: the poller, the wake-up, socket
// set-up, waiting on shared words, and the name limits every OS enforces
// (macOS's, so that a name that would fail on a Mac fails here too).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "driver/tcp/tcp_socket.hpp"
#include "mcdma_internal/shm_segment.hpp"
#include "mcdma_internal/wait.hpp"
#include "platform/names.hpp"
#include "platform/paths.hpp"
#include "platform/poller.hpp"
#include "platform/process.hpp"
#include "platform/socket.hpp"
#include "platform/wakeup.hpp"

namespace mcdma::platform {
namespace {

using std::chrono::milliseconds;

struct SocketPair {
  Fd a, b;
};

SocketPair MakePair() {
  int sv[2] = {-1, -1};
  EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0) << std::strerror(errno);
  return {Fd(sv[0]), Fd(sv[1])};
}

// Waits once and returns the events.
std::vector<PollEvent> WaitOnce(Poller& p, int timeout_ms) {
  std::array<PollEvent, 16> events{};
  auto n = p.Wait(events, timeout_ms);
  EXPECT_TRUE(n.ok()) << n.status().ToString();
  return {events.begin(), events.begin() + static_cast<long>(n.ok() ? *n : 0)};
}

TEST(PlatformPoller, ReportsReadableWithItsTagUntilDrained) {
  auto poller = Poller::Create();
  ASSERT_TRUE(poller.ok()) << poller.status().ToString();
  SocketPair s = MakePair();
  int tag = 0;
  ASSERT_TRUE(poller->Add(s.a.get(), &tag, kInterestRead).ok());
  EXPECT_TRUE(WaitOnce(*poller, 0).empty());
  ASSERT_EQ(write(s.b.get(), "hi", 2), 2);
  auto events = WaitOnce(*poller, 1000);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].tag, &tag);
  EXPECT_TRUE(events[0].readable);
  EXPECT_FALSE(events[0].writable);
  // Level-triggered: still there until read.
  EXPECT_EQ(WaitOnce(*poller, 0).size(), 1u);
  char buf[2];
  ASSERT_EQ(read(s.a.get(), buf, 2), 2);
  EXPECT_TRUE(WaitOnce(*poller, 0).empty());
}

TEST(PlatformPoller, MergesReadAndWriteIntoOneEventPerTag) {
  auto poller = Poller::Create();
  ASSERT_TRUE(poller.ok());
  SocketPair s = MakePair();
  int tag = 0;
  ASSERT_TRUE(poller->Add(s.a.get(), &tag, kInterestRead | kInterestWrite).ok());
  ASSERT_EQ(write(s.b.get(), "x", 1), 1);
  auto events = WaitOnce(*poller, 1000);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_TRUE(events[0].readable);
  EXPECT_TRUE(events[0].writable);
}

TEST(PlatformPoller, ModifyChangesInterestAndTag) {
  auto poller = Poller::Create();
  ASSERT_TRUE(poller.ok());
  SocketPair s = MakePair();
  int first = 0;
  int second = 0;
  ASSERT_TRUE(poller->Add(s.a.get(), &first, kInterestRead).ok());
  EXPECT_TRUE(WaitOnce(*poller, 0).empty());  // writable, but not asked for
  ASSERT_TRUE(poller->Modify(s.a.get(), &second, kInterestRead | kInterestWrite).ok());
  auto events = WaitOnce(*poller, 1000);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].tag, &second);
  EXPECT_TRUE(events[0].writable);
  ASSERT_TRUE(poller->Modify(s.a.get(), &second, kInterestRead).ok());
  EXPECT_TRUE(WaitOnce(*poller, 0).empty());
}

TEST(PlatformPoller, PeerCloseIsReadable) {
  auto poller = Poller::Create();
  ASSERT_TRUE(poller.ok());
  SocketPair s = MakePair();
  int tag = 0;
  ASSERT_TRUE(poller->Add(s.a.get(), &tag, kInterestRead).ok());
  s.b.Reset();
  auto events = WaitOnce(*poller, 1000);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_TRUE(events[0].readable);
  char c;
  EXPECT_EQ(read(s.a.get(), &c, 1), 0);  // end of stream
}

TEST(PlatformPoller, RemovedFdIsNoLongerReported) {
  auto poller = Poller::Create();
  ASSERT_TRUE(poller.ok());
  SocketPair s = MakePair();
  int tag = 0;
  ASSERT_TRUE(poller->Add(s.a.get(), &tag, kInterestRead).ok());
  ASSERT_EQ(write(s.b.get(), "x", 1), 1);
  poller->Remove(s.a.get());
  poller->Remove(s.a.get());  // twice: ignored
  EXPECT_TRUE(WaitOnce(*poller, 0).empty());
}

TEST(PlatformPoller, AddingAClosedFdIsANamedError) {
  auto poller = Poller::Create();
  ASSERT_TRUE(poller.ok());
  int tag = 0;
  Status st = poller->Add(987654, &tag, kInterestRead);
  EXPECT_EQ(st.code(), Code::kSystem);
  EXPECT_NE(st.message().find("Bad file descriptor"), std::string::npos) << st.message();
}

TEST(PlatformWakeup, SignalsCoalesceAndDrainClears) {
  auto wake = Wakeup::Create();
  ASSERT_TRUE(wake.ok()) << wake.status().ToString();
  auto poller = Poller::Create();
  ASSERT_TRUE(poller.ok());
  int tag = 0;
  ASSERT_TRUE(poller->Add(wake->fd(), &tag, kInterestRead).ok());
  EXPECT_TRUE(WaitOnce(*poller, 0).empty());
  for (int i = 0; i < 1000; ++i) wake->Signal();
  EXPECT_EQ(WaitOnce(*poller, 1000).size(), 1u);
  wake->Drain();
  EXPECT_TRUE(WaitOnce(*poller, 0).empty());
}

TEST(PlatformWakeup, WakesAPollerBlockedInAnotherThread) {
  auto wake = Wakeup::Create();
  auto poller = Poller::Create();
  ASSERT_TRUE(wake.ok() && poller.ok());
  int tag = 0;
  ASSERT_TRUE(poller->Add(wake->fd(), &tag, kInterestRead).ok());
  std::thread t([&] {
    std::this_thread::sleep_for(milliseconds(20));
    wake->Signal();
  });
  auto events = WaitOnce(*poller, 10'000);
  t.join();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].tag, &tag);
}

TEST(PlatformSocket, OpenSocketIsCloseOnExecAndNonBlockingWhenAsked) {
  auto nb = OpenSocket(AF_INET, SOCK_STREAM, 0, Blocking::kNonBlocking);
  ASSERT_TRUE(nb.ok()) << nb.status().ToString();
  EXPECT_NE(fcntl(nb->get(), F_GETFD) & FD_CLOEXEC, 0);
  EXPECT_NE(fcntl(nb->get(), F_GETFL) & O_NONBLOCK, 0);
  auto b = OpenSocket(AF_UNIX, SOCK_STREAM, 0, Blocking::kBlocking);
  ASSERT_TRUE(b.ok());
  EXPECT_NE(fcntl(b->get(), F_GETFD) & FD_CLOEXEC, 0);
  EXPECT_EQ(fcntl(b->get(), F_GETFL) & O_NONBLOCK, 0);
}

TEST(PlatformSocket, OpenSocketNamesTheFailure) {
  auto bad = OpenSocket(AF_INET, SOCK_STREAM, 12345, Blocking::kBlocking);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Code::kSystem);
  EXPECT_EQ(bad.status().message().rfind("socket:", 0), 0u) << bad.status().message();
}

TEST(PlatformSocket, AcceptedSocketsAreNonBlockingAndCloseOnExec) {
  auto listener = driver::tcp::Listen("127.0.0.1", 0);
  ASSERT_TRUE(listener.ok()) << listener.status().ToString();
  EXPECT_FALSE(Accept(listener->get(), Blocking::kNonBlocking).valid());  // nothing pending
  auto port = driver::tcp::BoundPort(listener->get());
  ASSERT_TRUE(port.ok());
  auto dialled = driver::tcp::Dial("127.0.0.1", *port,
                                   std::chrono::steady_clock::now() + std::chrono::seconds(5));
  ASSERT_TRUE(dialled.ok()) << dialled.status().ToString();
  Fd accepted;
  for (int i = 0; i < 500 && !accepted.valid(); ++i) {
    accepted = Accept(listener->get(), Blocking::kNonBlocking);
    if (!accepted.valid()) std::this_thread::sleep_for(milliseconds(2));
  }
  ASSERT_TRUE(accepted.valid());
  EXPECT_NE(fcntl(accepted.get(), F_GETFD) & FD_CLOEXEC, 0);
  EXPECT_NE(fcntl(accepted.get(), F_GETFL) & O_NONBLOCK, 0);
}

TEST(PlatformSocket, SendingToAClosedPeerIsEpipeNotSigpipe) {
  // With SIGPIPE at its default action this process would die here.
  struct sigaction old {};
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  ASSERT_EQ(sigaction(SIGPIPE, &dfl, &old), 0);
  auto a = OpenSocket(AF_UNIX, SOCK_STREAM, 0, Blocking::kBlocking);
  ASSERT_TRUE(a.ok());
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  Fd mine(sv[0]);
  ::close(sv[1]);
  ssize_t n = SendNoSignal(mine.get(), "x", 1, 0);
  int err = errno;
  msghdr msg{};
  iovec iov{.iov_base = const_cast<char*>("y"), .iov_len = 1};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  ssize_t m = SendMsgNoSignal(mine.get(), &msg, 0);
  int err2 = errno;
  sigaction(SIGPIPE, &old, nullptr);
  EXPECT_EQ(n, -1);
  EXPECT_EQ(err, EPIPE);
  EXPECT_EQ(m, -1);
  EXPECT_EQ(err2, EPIPE);
}

TEST(PlatformSocket, TcpLivenessIsApplied) {
  auto fd = OpenSocket(AF_INET, SOCK_STREAM, 0, Blocking::kNonBlocking);
  ASSERT_TRUE(fd.ok());
  TcpLiveness l;
  l.keepalive_idle = std::chrono::seconds(11);
  l.keepalive_interval = std::chrono::seconds(4);
  l.keepalive_count = 5;
  l.unacked_timeout = milliseconds(12'000);
  ASSERT_TRUE(SetTcpLiveness(fd->get(), l).ok());
  int v = 0;
  socklen_t len = sizeof(v);
  ASSERT_EQ(getsockopt(fd->get(), SOL_SOCKET, SO_KEEPALIVE, &v, &len), 0);
  EXPECT_EQ(v, 1);
  ASSERT_EQ(getsockopt(fd->get(), IPPROTO_TCP, TCP_KEEPINTVL, &v, &len), 0);
  EXPECT_EQ(v, 4);
  ASSERT_EQ(getsockopt(fd->get(), IPPROTO_TCP, TCP_KEEPCNT, &v, &len), 0);
  EXPECT_EQ(v, 5);
  // A bad fd is a named error.
  Status st = SetTcpLiveness(987654, l);
  EXPECT_EQ(st.code(), Code::kSystem);
  EXPECT_NE(st.message().find("SO_KEEPALIVE"), std::string::npos) << st.message();
}

TEST(PlatformNames, ShmNamesAreLimitedTo31BytesOnEveryOs) {
  EXPECT_TRUE(CheckShmName("/" + std::string(30, 'a')).ok());
  Status st = CheckShmName("/" + std::string(31, 'a'));
  EXPECT_EQ(st.code(), Code::kInvalid);
  EXPECT_NE(st.message().find("is 32 bytes; macOS allows at most 31"), std::string::npos)
      << st.message();
  EXPECT_EQ(CheckShmName("noslash").code(), Code::kInvalid);
  EXPECT_EQ(CheckShmName("/").code(), Code::kInvalid);
  EXPECT_EQ(CheckShmName("/a/b").code(), Code::kInvalid);
  EXPECT_EQ(CheckShmName("/a b").code(), Code::kInvalid);
}

TEST(PlatformNames, FreshSegmentNamesFitAndDiffer) {
  std::string m = ShmSegment::NewName('m');
  std::string b = ShmSegment::NewName('b');
  EXPECT_EQ(m.size(), kMaxShmNameBytes);
  EXPECT_EQ(m.rfind("/mcdma-m-", 0), 0u);
  EXPECT_EQ(b.rfind("/mcdma-b-", 0), 0u);
  EXPECT_TRUE(CheckShmName(m).ok());
  EXPECT_NE(m, ShmSegment::NewName('m'));
}

TEST(PlatformNames, SegmentsWithTooLongANameAreRefusedBeforeTheOsSeesThem) {
  auto seg = ShmSegment::Create("/mcdma-this-name-is-longer-than-31", 4096, getuid());
  ASSERT_FALSE(seg.ok());
  EXPECT_EQ(seg.status().code(), Code::kInvalid);
  EXPECT_NE(seg.status().message().find("PSHMNAMLEN"), std::string::npos);
  auto opened = ShmSegment::Open("/mcdma-this-name-is-longer-than-31", 4096);
  EXPECT_EQ(opened.status().code(), Code::kInvalid);
}

TEST(PlatformNames, UnixSocketPathsAreLimitedTo103Bytes) {
  EXPECT_TRUE(CheckUnixSocketPath("/" + std::string(102, 'p')).ok());
  Status st = CheckUnixSocketPath("/" + std::string(103, 'p'));
  EXPECT_EQ(st.code(), Code::kInvalid);
  EXPECT_NE(st.message().find("is 104 bytes; macOS allows at most 103"), std::string::npos)
      << st.message();
  EXPECT_EQ(CheckUnixSocketPath("").code(), Code::kInvalid);
}

TEST(PlatformNames, LinuxDefaultPaths) {
  EXPECT_STREQ(ServiceSocketPath(), "/run/mcdma/rpcd.sock");
  const char* old = std::getenv("XDG_RUNTIME_DIR");
  std::string saved = old != nullptr ? old : "";
  setenv("XDG_RUNTIME_DIR", "/run/user/1234", 1);
  EXPECT_EQ(UserRuntimeDir(), "/run/user/1234");
  unsetenv("XDG_RUNTIME_DIR");
  EXPECT_EQ(UserRuntimeDir(), "");
  if (old != nullptr) setenv("XDG_RUNTIME_DIR", saved.c_str(), 1);
}

TEST(PlatformProcess, ProgramNameIsTheExecutablesFileName) {
  EXPECT_EQ(ProgramName(), "mcdma_unit_tests");
}

TEST(PlatformWordWait, WaitReturnsWhenTheWordChangesAndIsWoken) {
  std::atomic<uint32_t> word{0};
  std::thread t([&] {
    std::this_thread::sleep_for(milliseconds(20));
    word.store(1);
    wait::FutexWake(&word, 1, /*shared=*/false);
  });
  auto start = std::chrono::steady_clock::now();
  while (word.load() == 0) wait::FutexWait(&word, 0, std::chrono::seconds(10), false);
  t.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(PlatformWordWait, WaitOnManyWordsReturnsForAnyOfThem) {
  std::array<std::atomic<uint32_t>, 3> words{};
  std::array<wait::WaitTarget, 3> targets{};
  for (size_t i = 0; i < words.size(); ++i) targets[i] = {&words[i], 0, false};
  std::thread t([&] {
    std::this_thread::sleep_for(milliseconds(20));
    words[2].store(1);
    wait::FutexWake(&words[2], 1, false);
  });
  auto start = std::chrono::steady_clock::now();
  while (words[2].load() == 0) wait::FutexWaitMany(targets, std::chrono::seconds(10));
  t.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(PlatformWordWait, WaitWithAnUnchangedWordTimesOut) {
  std::atomic<uint32_t> word{7};
  auto start = std::chrono::steady_clock::now();
  wait::FutexWait(&word, 7, milliseconds(30), false);
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(25));
  EXPECT_EQ(word.load(), 7u);
}

}  // namespace
}  // namespace mcdma::platform
