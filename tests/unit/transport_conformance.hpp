// The transport conformance suite: one set of tests for the contract in
// driver/transport.hpp, run against every transport through a small factory.
// Each transport's test file instantiates it (INSTANTIATE_TEST_SUITE_P with
// its factory) and keeps only the tests of what is really its own:
//   loop  tests/unit/test_loop_transport.cpp (pairing names, synchronous Poll)
//   tcp   tests/unit/test_tcp_transport.cpp (sockets, tokens, hostile peers)
//   verbs tests/verbs/verbs_conformance.cpp (rxe1/rxe2 in the Soft-RoCE VM,
//         once per device profile)
//
// Completions may arrive on another thread (tcp, verbs), so every wait polls
// with a bound, sleeping between polls, and fails loudly when it runs out;
// over loop the first poll already has them.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "driver/transport.hpp"
#include "mcdma/status.hpp"

namespace mcdma::driver::conformance {

inline constexpr uint64_t kMiB = 1ULL << 20;
inline constexpr auto kWait = std::chrono::seconds(10);

// Both ends of one link.
struct Link {
  std::unique_ptr<Connection> a;
  std::unique_ptr<Connection> b;
};

// What a transport may lack; a test that needs it is skipped with the reason.
enum class Feature : uint8_t {
  kForcedCaps,          // MakeDevice honours forced limits
  kOffsetAddresses,     // MemoryRegion::RemoteAddr(offset) == offset
  kRemoteErrorKeepsUp,  // a refused remote access leaves the connection up
  kSelfConnectRefused,  // Connect with the endpoint's own info is kInvalid
  kDistinctKeys,        // a region's lkey and rkey differ
  kSendMeetsRecv,       // a SEND completes only once it met the peer's RECV
                        // (waiting while none is posted, failing with one
                        // that is too small)
  kNotifies             // the device calls its notifier (Device::SetNotifier)
};

// How the suite reaches one transport. Owned by the instantiation; used on
// the test's thread only.
class TransportFactory {
 public:
  virtual ~TransportFactory() = default;
  // The instantiation's name in test names: letters, digits, underscores.
  virtual std::string Name() const = 0;
  // The limits a device has unforced: the base the limit tests tighten.
  virtual Caps DefaultCaps() const = 0;
  // A fresh device; `caps`, when given, forces those limits (only called
  // when Lacks(kForcedCaps) is empty).
  virtual Result<std::unique_ptr<Device>> MakeDevice(const Caps* caps) = 0;
  // True when both ends of a link live on one device (loop): the suite then
  // passes the same device as both `a` and `b` to Connect.
  virtual bool OneDevice() const = 0;
  // Connects an endpoint of `a` with one of `b`; a null side on failure.
  virtual Link Connect(Device& a, Device& b) = 0;
  // True when a connection makes progress only while its peer is polled
  // too (verbs: credits and messages move in Poll). The suite's waits then
  // poll the peer as well, keeping its completions for its own waits.
  virtual bool PollsPeerToProgress() const { return false; }
  // Empty when the transport has `feature`; otherwise why it does not.
  virtual std::string Lacks(Feature feature) const {
    (void)feature;
    return {};
  }
};

// Connect for transports whose Connect returns at once (loop, verbs): A's,
// then B's, on this thread.
Link ConnectInTurn(Device& a, Device& b);
// Connect for transports whose Connect blocks until the peer's runs (tcp):
// B's on a thread of its own.
Link ConnectTogether(Device& a, Device& b);
// Connects two endpoints made for each other: B's Connect runs on a thread
// of its own (a transport's Connect may wait for the peer). Consumes both;
// an empty Link (and a failure) when either is not ok or does not connect.
Link ConnectEndpoints(Result<std::unique_ptr<Endpoint>> ea, Result<std::unique_ptr<Endpoint>> eb);

// Test data: bytes that differ from their neighbours and across 4 KiB pages.
std::vector<uint8_t> Pattern(size_t n, uint8_t seed);
std::byte* Bytes(std::vector<uint8_t>& v);
// Registers all of `buf`; null (and a test failure) if the device refuses.
std::unique_ptr<MemoryRegion> Register(Device& device, std::vector<uint8_t>& buf, uint32_t access);
// Polls until `n` completions arrived or `limit` passed (a failure); never
// reaps more than `n`.
std::vector<WorkCompletion> WaitFor(Connection& c, size_t n,
                                    std::chrono::steady_clock::duration limit = kWait);
// One completion, or a kInternal placeholder after a failure.
WorkCompletion WaitOne(Connection& c);
// Polls for `how_long` and fails on any completion.
void ExpectQuiet(Connection& c,
                 std::chrono::milliseconds how_long = std::chrono::milliseconds(100));

// Two devices (one, for a one-device transport) and a link between them.
struct Rig {
  std::unique_ptr<Device> a_dev;
  std::unique_ptr<Device> b_dev;  // null for a one-device transport
  Link link;
  Device& b() { return b_dev != nullptr ? *b_dev : *a_dev; }
};

// A rig of `factory`'s devices, with `caps` forced (null: defaults). A
// failure leaves a null side and fails the test.
Rig MakeRig(TransportFactory& factory, const Caps* caps);

// A fixture with a linked rig of one transport, for that transport's own
// tests (the conformance suite has its own fixture below).
template <typename Factory>
class LinkedRig : public ::testing::Test {
 protected:
  void SetUp() override {
    rig_ = MakeRig(factory_, nullptr);
    ASSERT_NE(rig_.link.a, nullptr);
    ASSERT_NE(rig_.link.b, nullptr);
  }

  Factory factory_;
  Rig rig_;
};

using FactoryPtr = std::shared_ptr<TransportFactory>;

// The suite's fixture: a linked rig with default caps, made in SetUp.
class TransportConformance : public ::testing::TestWithParam<FactoryPtr> {
 protected:
  void SetUp() override;
  TransportFactory& factory() const { return *GetParam(); }
  // A fresh device (failing the test when it cannot be made).
  std::unique_ptr<Device> NewDevice(const Caps* caps = nullptr) const;
  // Replaces the rig with one whose devices have the defaults as `tighten`
  // changes them (limit tests; requires Feature::kForcedCaps).
  template <typename Tighten>
  void Relink(Tighten tighten) {
    Caps caps = factory().DefaultCaps();
    tighten(caps);
    rig_.link = {};  // connections first, then their devices
    rig_.b_dev.reset();
    rig_.a_dev.reset();
    rig_ = MakeRig(factory(), &caps);
    ASSERT_NE(rig_.link.a, nullptr);
    ASSERT_NE(rig_.link.b, nullptr);
  }

  // The waits above, for the rig's connections: they also poll the peer
  // when the transport needs that (PollsPeerToProgress), so a test reads
  // the same whichever transport it runs on.
  std::vector<WorkCompletion> WaitFor(Connection& c, size_t n,
                                      std::chrono::steady_clock::duration limit = kWait);
  WorkCompletion WaitOne(Connection& c);
  void ExpectQuiet(Connection& c,
                   std::chrono::milliseconds how_long = std::chrono::milliseconds(100));

  Device& a_dev() { return *rig_.a_dev; }
  Device& b_dev() { return rig_.b(); }
  Connection& a() { return *rig_.link.a; }
  Connection& b() { return *rig_.link.b; }

  Rig rig_;

 private:
  // The rig connection to poll along with `c`, or null when none need be.
  Connection* PeerToPoll(const Connection& c) const;
  // Polls `peer` once, keeping what it reaped; returns how many.
  size_t PollPeer(Connection& peer);

  // Completions reaped from a connection while waiting on its peer.
  std::map<const Connection*, std::deque<WorkCompletion>> kept_;
};

// Skips the test, naming why, when the transport lacks `feature`.
#define MCDMA_REQUIRE_FEATURE(feature)                                     \
  do {                                                                     \
    std::string lacks = factory().Lacks(feature);                          \
    if (!lacks.empty()) GTEST_SKIP() << factory().Name() << ": " << lacks; \
  } while (0)

// How GoogleTest prints a parameter: the transport's name.
inline void PrintTo(const FactoryPtr& factory, std::ostream* os) { *os << factory->Name(); }

// The name INSTANTIATE_TEST_SUITE_P gives each instantiation.
std::string FactoryName(const ::testing::TestParamInfo<FactoryPtr>& info);

}  // namespace mcdma::driver::conformance
