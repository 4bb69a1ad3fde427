// loop: the same-host transport. Bytes move by memcpy inside this process; no
// NIC is involved. It exists so that two sessions on one host can talk
// through the same code paths as remote peers, and so that the daemon's link
// logic can be tested without hardware.
//
// Loop enforces the rules of the strictest transport (verbs) even where it
// could do more, so code that passes over loop does not break over a NIC:
//   * memory must be registered before use; lkeys/rkeys are random 32-bit,
//     nonzero, and never shared by two live registrations;
//   * a one-sided request names remote memory by (rkey, offset): for loop,
//     MemoryRegion::RemoteAddr(offset) == offset;
//   * local slices are checked when posted (the Post* Status); remote access
//     is checked when the request executes, like a NIC's responder: an
//     unknown or deregistered rkey or a missing access right completes with
//     kPermissionDenied, a range outside the region with kOutOfRange;
//   * Caps limits (queue depth, READs in flight, transfer and registration
//     sizes, registration count) are enforced, including limits forced
//     stricter than loop needs, which is how device profiles (mcdma-cx5,
//     apple-tb5) are exercised without their hardware;
//   * a SEND consumes the peer's oldest posted RECV; with none posted it
//     waits (receiver-not-ready) and holds up the requests behind it.
//
// Work is executed in Connection::Poll(): polling either side of a pair
// progresses both sides' queues, in post order per connection; completions
// are delivered only to the connection that posted the request. Every queued
// request yields exactly one WorkCompletion.
//
// Pairing: Endpoint::LocalInfo() names the endpoint within its device.
// A.Connect(B.LocalInfo()) and B.Connect(A.LocalInfo()) make a pair; until
// the second Connect, the first connection accepts only RECVs (others fail
// kLinkDown). Info naming nothing live on this device (another device's
// endpoint, a destroyed one, one whose Connect failed) fails kNotFound; info
// naming an endpoint that connected to a third one fails kInvalid. When one
// side of a pair is destroyed, the other's posts fail kLinkDown and its SENDs
// still queued complete with kLinkDown at its next Poll; nothing else is
// flushed.
//
// Threading: not thread-safe. The device and everything created from it are
// owned by one thread (the daemon's engine thread). Children hold a
// reference to the device's shared state, so destroying them after the
// device is safe, but the contract in transport.hpp still applies.
#pragma once

#include <memory>

#include "driver/transport.hpp"
#include "mcdma/status.hpp"

namespace mcdma::driver::loop {

// The limits loop reports by default: name "loop", profile "loop",
// one-sided, 256 requests per queue, 16 READs in flight, 1 GiB per READ or
// WRITE/SEND, 1 TiB per registration, no limit on registrations, no inline.
Caps DefaultLoopCaps();

// Creates a loop device. `override_caps`, when given, replaces every limit
// (a device profile forced onto loop); its `name` is ignored and reported as
// "loop", because which transport carried a result is always reported. Fails
// with kInvalid for caps no work could pass (max_outstanding,
// max_transfer_bytes or max_registration_bytes of 0, an empty profile).
Result<std::unique_ptr<Device>> CreateLoopDevice(const Caps* override_caps = nullptr);

}  // namespace mcdma::driver::loop
