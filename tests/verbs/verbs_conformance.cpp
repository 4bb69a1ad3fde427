// Runs inside the Soft-RoCE VM (tests/verbs/vm.sh): the transport
// conformance suite (tests/unit/transport_conformance.hpp) against the verbs
// transport between rxe1 and rxe2, whose packets cross a veth pair, once
// per device profile forced onto rxe. What verbs does not share with loop
// and tcp is skipped with the reason: forced limits (a verbs device's come
// from the device and its profile), offset addresses (verbs names remote
// memory by virtual address), refusing a self-connect (a QP may be
// connected to itself), distinct lkeys and rkeys (an MR's may be equal),
// SENDs that wait for and fail with the peer's RECV (a SEND completes once
// it is in the peer's receive ring) and, over RC, a connection that stays up after
// the peer's NIC refused a remote access (the QP goes to the error state).
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "driver/profiles.hpp"
#include "driver/verbs/verbs_transport.hpp"
#include "tests/unit/transport_conformance.hpp"

namespace mcdma::driver::verbs {
namespace {

using conformance::Feature;
using conformance::TransportConformance;

class VerbsFactory final : public conformance::TransportFactory {
 public:
  explicit VerbsFactory(std::string profile) : profile_(std::move(profile)) {}

  std::string Name() const override {
    std::string name = profile_;
    for (char& c : name) {
      if (c == '-') c = '_';
    }
    return name;
  }
  Caps DefaultCaps() const override {
    const Limits* limits = FindVerbsProfile(profile_);
    return limits != nullptr ? ToCaps(*limits, "verbs") : Caps{};
  }
  // Devices alternate between the two ends of the veth pair, so a rig's
  // `a` is on rxe1 and its `b` on rxe2.
  Result<std::unique_ptr<Device>> MakeDevice(const Caps* caps) override {
    (void)caps;  // never forced: Lacks(kForcedCaps)
    const bool first = next_++ % 2 == 0;
    MCDMA_ASSIGN_OR_RETURN(auto device, VerbsDevice::Open({.device = first ? "rxe1" : "rxe2",
                                                           .port = 1,
                                                           .interface = first ? "veth0" : "veth1",
                                                           .gid_index = -1,
                                                           .profile = profile_}));
    return std::unique_ptr<Device>(std::move(device));
  }
  bool OneDevice() const override { return false; }
  conformance::Link Connect(Device& a, Device& b) override {
    return conformance::ConnectInTurn(a, b);
  }
  bool PollsPeerToProgress() const override { return true; }
  std::string Lacks(Feature feature) const override {
    if (feature == Feature::kForcedCaps)
      return "a verbs device's limits are its own and its profile's";
    if (feature == Feature::kOffsetAddresses) return "verbs names remote memory by virtual address";
    if (feature == Feature::kSelfConnectRefused) {
      return "a QP may be connected to itself; verbs does not refuse it";
    }
    if (feature == Feature::kDistinctKeys) return "an MR's lkey may be its rkey";
    if (feature == Feature::kSendMeetsRecv) {
      return "a SEND completes once it is in the peer's receive ring; RECVs are matched there";
    }
    if (feature == Feature::kRemoteErrorKeepsUp && profile_ != kProfileAppleTb5) {
      return "over RC a refused remote access takes the QP to the error state";
    }
    return {};
  }

 private:
  std::string profile_;
  unsigned next_ = 0;
};

INSTANTIATE_TEST_SUITE_P(Verbs, TransportConformance,
                         ::testing::Values(std::make_shared<VerbsFactory>(kProfileLinuxRc),
                                           std::make_shared<VerbsFactory>(kProfileMcdmaCx5),
                                           std::make_shared<VerbsFactory>(kProfileAppleTb5)),
                         conformance::FactoryName);

}  // namespace
}  // namespace mcdma::driver::verbs
