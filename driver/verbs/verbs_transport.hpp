// The verbs transport: driver/transport.hpp over libibverbs (rdma-core on
// Linux, the MCDMA provider on macOS).
//
// Messaging. Each connection owns a ring of receive slots (its own
// registered memory) and puts a 16-byte header (verbs_wire.hpp) in front of
// every SEND, gathered from a second SGE so the caller's bytes go out
// without a copy. A received message is copied into the oldest RECV the
// owner posted; until the owner posts one it waits in its slot. Credits: a
// header carries the sender's running count of slots posted, and a SEND is
// issued only while the peer has a free slot; one slot's worth is kept back
// for CREDIT messages, sent when half the ring has been reposted and nothing
// else carried the count, so two busy ends never stall. That is what makes
// SEND/RECV safe over UC (apple-tb5), where a SEND without a posted RECV
// is silently lost: receives are posted after RTS there, and each side says
// HELLO before its first credit counts.
//
// Order. Requests leave in the order they were posted: one waiting for
// credit (or for a READ slot) holds up those behind it, as on the tcp
// transport.
//
// Limits. The connection runs at the stricter of both ends' profiles; the
// device's limits are enforced at post time (CheckPostLength / Room) and
// never exceeded on the queue itself: at most max_outstanding work requests
// on the send queue (one of them reserved for CREDIT messages, so Caps
// tells callers one less), at most max_outstanding_reads READs of at most
// max_read_bytes each.
//
// Streamed one-sided operations. Where the profile has no RDMA READ/WRITE
// (apple-tb5), PostWrite and PostRead still work: the operation travels as
// SENDs (verbs_wire.hpp) and the peer's transport applies it to its
// registrations with the checks a NIC makes (rkey known, right granted,
// range inside), answering with the status. caps().one_sided stays false:
// nothing is RDMA.
//
// Progress. Poll() does all the work on the owner's thread, reaping the
// CQ itself (ibv_poll_cq): a busy owner polls and nothing else runs. A
// thread per device waits on the completion channel and the async event fd
// and calls the notifier; a CQ raises an event only once armed, and only
// Connection::ArmWakeup arms it (then polls once more), which the owner
// calls just before it sleeps. So a completion costs an interrupt and a
// thread wake-up only when the owner was about to sleep anyway. Async
// events (QP fatal, port down) and failed completions take the connection
// down with a message naming the likely cause.
//
// Port state. Only the configured port's events count (a device with two
// ports keeps its connections when the other port goes down). After every
// batch of async events, and every second besides, the same thread reads
// the port's state back (ibv_query_port) and that reading wins: Soft-RoCE
// may deliver PORT_ERR / PORT_ACTIVE late or coalesced, and an interface
// brought back up must show as active even if its event was missed.
//
// Queue pairs. Each endpoint holds one QP from CreateEndpoint until the
// endpoint, or the connection it became, is destroyed; CreateEndpoint
// refuses (kNoMemory) a QP beyond caps().max_queue_pairs. The count is the
// opened VerbsDevice's, not the NIC's: open each device once per process.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "driver/transport.hpp"
#include "driver/verbs/verbs_model.hpp"
#include "mcdma/status.hpp"

namespace mcdma::driver::verbs {

struct VerbsConfig {
  std::string device;  // "" = the first device with an ACTIVE port
  uint8_t port = 1;
  std::string interface;   // GID rule: the interface peers are reached on
  int32_t gid_index = -1;  // GID rule: fallback index (-1: none)
  std::string profile;     // "" = detected
  // Each connection's receive ring; clamped to the profile (slot size to
  // the registration limit and, under apple-tb5, to one 4 KiB frame).
  uint32_t ring_slots = 32;
  uint32_t ring_slot_bytes = 64 << 10;
};

// What was opened, for status displays and `mcdmactl doctor`.
struct VerbsDeviceStatus {
  DeviceInfo info;
  Gid gid;
  std::string detected_profile;
  Caps caps;  // of the profile in force
};

// Test hooks: the highest number of work requests a connection of this
// device ever had on its send queue, and of READs in flight.
struct VerbsHighWater {
  uint32_t send_queue = 0;
  uint32_t reads = 0;
  uint64_t largest_read = 0;
  uint64_t largest_send = 0;  // bytes of one SEND on the wire, headers included
};

// One port of one RDMA device.
struct PortRef {
  std::string device;
  uint8_t port = 1;
};
// Every (device, port) whose port state is ACTIVE, ordered by device name then
// port number. An empty list when there are devices but none is active;
// kNotFound (naming what was looked at) when there is no RDMA device at all.
// Any thread; opens each device briefly (a device that cannot be opened or
// queried has no active port as far as this host can use it).
Result<std::vector<PortRef>> ListActivePorts();

// Threads: the engine thread owns the device as driver::Device says; the
// port and usage readers below may be called from any thread at any time.
class VerbsDevice : public Device {
 public:
  // kNotFound when there is no (usable) device, naming what was looked at.
  static Result<std::unique_ptr<VerbsDevice>> Open(const VerbsConfig& config);
  virtual const VerbsDeviceStatus& status() const = 0;
  virtual VerbsHighWater high_water() const = 0;
  // Whether the device's port (VerbsConfig::port) is ACTIVE now: read with
  // ibv_query_port at open, then kept by the async events of that port.
  virtual bool port_active() const = 0;
  // Why the port is not active ("" while it is): the last port event's meaning
  // (or, when the port was read back down with no event, the state read).
  virtual std::string port_failure() const = 0;
  // Queue pairs in use now (endpoints not yet connected + connections), and
  // registrations in use now.
  virtual uint32_t queue_pairs() const = 0;
  virtual uint32_t registrations() const = 0;
};

}  // namespace mcdma::driver::verbs
