// Peer authentication: the mutual HMAC-SHA256 challenge-response two daemons
// run on their peer gRPC channel (Peer.Authenticate, proto/mcdma/v1/peer.proto)
// before anything else is answered. Pure logic, no networking: the Peer
// service and the link code move these structs to and from the proto
// messages of the same names.
//
// The exchange (K = the fabric key, see fabric_key.hpp):
//   1. initiator -> Hello     {version=1, id_i, nonce_i}
//   2. responder -> Challenge {version=1, id_r, nonce_r, proof_r}
//        proof_r = HMAC-SHA256(K, Transcript("mcdma-peer-v1 responder"))
//   3. initiator checks proof_r, then -> Proof {proof_i}
//        proof_i = HMAC-SHA256(K, Transcript("mcdma-peer-v1 initiator"))
//   4. responder checks proof_i, then -> Ticket {ticket, ttl_ms}
//   Transcript(label) = LP(label) || LP(nonce_i) || LP(nonce_r) || LP(id_i)
//                       || LP(id_r), LP(x) = uint32 big-endian length || x.
// Nonces are 32 bytes from the CSPRNG, fresh per object; an Initiator or
// Responder runs one exchange and is dead after any failure, so a nonce is
// never used twice. Both proofs cover both nonces (no replay into another
// exchange), and the two labels differ (a responder proof reflected back as
// an initiator proof fails). The responder proves first, so a responder
// without the key learns nothing from the initiator.
//
// What it does not do: the key authenticates membership of the fabric, not
// one host; any key holder can claim any host id. The ticket is a bearer
// token: on a plaintext channel an on-path attacker can steal it or relay the
// exchange. Use TLS on an untrusted management network.
//
// Failure codes (messages never contain key, proof or ticket bytes):
//   INVALID            malformed message (sizes, host id syntax, version,
//                      own host id claimed by the peer, out-of-order step)
//   PERMISSION_DENIED  "fabric key mismatch": a proof did not verify, or
//                      the ticket is unknown or expired
//   INTERNAL           the CSPRNG failed
//
// Threads: an Initiator or Responder belongs to the one thread (or gRPC
// stream) running its exchange. TicketBook is thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "mcdma/status.hpp"
#include "mcdma_auth/fabric_key.hpp"
#include "mcdma_internal/thread_annotations.hpp"

namespace mcdma::peer_auth {

inline constexpr uint32_t kVersion = 1;
inline constexpr size_t kNonceBytes = 32;
inline constexpr size_t kProofBytes = 32;  // HMAC-SHA256
inline constexpr size_t kTicketBytes = 16;
// Tickets travel as lowercase hex in this gRPC metadata entry.
inline constexpr size_t kTicketHexChars = 2 * kTicketBytes;
inline constexpr const char* kTicketMetadataKey = "mcdma-ticket";
// Host ids: 1..255 bytes of printable ASCII without spaces (0x21-0x7e).
inline constexpr size_t kMaxHostIdBytes = 255;
inline constexpr const char* kResponderLabel = "mcdma-peer-v1 responder";
inline constexpr const char* kInitiatorLabel = "mcdma-peer-v1 initiator";

// The four messages; byte fields are std::string, as protobuf `bytes` are.
struct Hello {
  uint32_t version = kVersion;
  std::string host_id;  // id_i
  std::string nonce;    // nonce_i, kNonceBytes
};
struct Challenge {
  uint32_t version = kVersion;
  std::string host_id;  // id_r
  std::string nonce;    // nonce_r, kNonceBytes
  std::string proof;    // proof_r, kProofBytes
};
struct Proof {
  std::string proof;  // proof_i, kProofBytes
};
struct Ticket {
  std::string ticket;  // kTicketHexChars lowercase hex
  uint64_t ttl_ms = 0;
};

// What both proofs are computed over.
struct Transcript {
  std::string nonce_i;
  std::string nonce_r;
  std::string id_i;
  std::string id_r;
};

enum class Role { kInitiator, kResponder };

// HMAC-SHA256(key, Transcript(label of `role`)): kProofBytes raw bytes.
// Public so that tests and a second implementation can check the exact bytes.
std::string ComputeProof(const FabricKey& key, Role role, const Transcript& transcript);

// INVALID unless `host_id` is 1..255 bytes of 0x21-0x7e.
Status ValidateHostId(std::string_view host_id);

// Issued tickets: which peer each authorizes, until when. Stores SHA-256 of
// each ticket, not the ticket, and looks tickets up by that digest, so lookup
// timing says nothing about stored tickets. Thread-safe (one mutex).
class TicketBook {
 public:
  using Clock = std::chrono::steady_clock;

  // `ttl`: lifetime of each ticket (no sliding renewal: peers re-authenticate).
  // `max_per_peer`: live tickets per host id; issuing one more evicts that
  // peer's oldest (reconnect storms do not grow the book).
  // `max_total`: beyond it (after dropping expired ones) Issue fails BUSY.
  explicit TicketBook(std::chrono::milliseconds ttl = std::chrono::hours(1),
                      size_t max_per_peer = 16, size_t max_total = 4096);

  // A fresh ticket for `peer_host_id` (kTicketHexChars lowercase hex).
  Result<std::string> Issue(const std::string& peer_host_id, Clock::time_point now = Clock::now())
      MCDMA_EXCLUDES(mu_);
  // The host id `ticket` was issued to. PERMISSION_DENIED if unknown, revoked
  // or expired (expired ones are dropped); INVALID if not 32 hex characters.
  Result<std::string> Verify(std::string_view ticket, Clock::time_point now = Clock::now())
      MCDMA_EXCLUDES(mu_);
  // Forgets one ticket / every ticket of a peer (Goodbye, link torn down).
  void Revoke(std::string_view ticket) MCDMA_EXCLUDES(mu_);
  void RevokePeer(const std::string& peer_host_id) MCDMA_EXCLUDES(mu_);
  // Live (possibly expired but not yet dropped) tickets.
  size_t size() const MCDMA_EXCLUDES(mu_);
  std::chrono::milliseconds ttl() const { return ttl_; }

 private:
  struct Entry {
    std::string host_id;
    Clock::time_point expires;
    uint64_t serial;  // issue order, to find a peer's oldest
  };
  void DropExpiredLocked(Clock::time_point now) MCDMA_REQUIRES(mu_);

  const std::chrono::milliseconds ttl_;
  const size_t max_per_peer_;
  const size_t max_total_;
  mutable Mutex mu_;
  // Keyed by SHA-256(ticket) (raw 32 bytes).
  std::unordered_map<std::string, Entry> entries_ MCDMA_GUARDED_BY(mu_);
  uint64_t next_serial_ MCDMA_GUARDED_BY(mu_) = 0;
};

// What a successful initiator ends with.
struct Session {
  std::string peer_host_id;
  std::string ticket;  // send as metadata kTicketMetadataKey on every call
  std::chrono::milliseconds ttl{0};
};

// The dialing side. Create -> hello() -> OnChallenge -> OnTicket.
class Initiator {
 public:
  // `expected_peer`, if not empty, is the host id the initiator meant to
  // dial; a responder claiming another id fails INVALID (misconfiguration).
  static Result<Initiator> Create(std::shared_ptr<const FabricKey> key, std::string own_host_id,
                                  std::string expected_peer = {});

  Initiator(Initiator&&) noexcept = default;
  Initiator& operator=(Initiator&&) noexcept = default;
  Initiator(const Initiator&) = delete;
  Initiator& operator=(const Initiator&) = delete;
  ~Initiator() = default;

  // Message 1. Stable for the object's life.
  const Hello& hello() const { return hello_; }
  // Checks message 2; returns message 3. PERMISSION_DENIED "fabric key
  // mismatch" if proof_r does not verify.
  Result<Proof> OnChallenge(const Challenge& challenge);
  // Checks message 4 (well-formed ticket) and ends the exchange.
  Result<Session> OnTicket(const Ticket& ticket);

 private:
  enum class State { kAwaitChallenge, kAwaitTicket, kDone, kFailed };
  Initiator(std::shared_ptr<const FabricKey> key, Hello hello, std::string expected_peer);
  Status Fail(Status status);

  std::shared_ptr<const FabricKey> key_;
  Hello hello_;
  std::string expected_peer_;
  std::string peer_host_id_;
  State state_ = State::kAwaitChallenge;
};

// The answering side. Create -> OnHello -> OnProof.
class Responder {
 public:
  static Result<Responder> Create(std::shared_ptr<const FabricKey> key, std::string own_host_id);

  Responder(Responder&&) noexcept = default;
  Responder& operator=(Responder&&) noexcept = default;
  Responder(const Responder&) = delete;
  Responder& operator=(const Responder&) = delete;
  ~Responder() = default;

  // Checks message 1; returns message 2.
  Result<Challenge> OnHello(const Hello& hello);
  // Checks message 3 (PERMISSION_DENIED "fabric key mismatch" if proof_i
  // does not verify); on success issues a ticket from `book` for the peer.
  Result<Ticket> OnProof(const Proof& proof, TicketBook& book);
  // The initiator's host id; authenticated only once OnProof succeeded.
  const std::string& peer_host_id() const { return transcript_.id_i; }
  bool authenticated() const { return state_ == State::kDone; }

 private:
  enum class State { kAwaitHello, kAwaitProof, kDone, kFailed };
  Responder(std::shared_ptr<const FabricKey> key, std::string own_host_id, std::string nonce);
  Status Fail(Status status);

  std::shared_ptr<const FabricKey> key_;
  Transcript transcript_;  // id_r and nonce_r from Create, the rest from OnHello
  State state_ = State::kAwaitHello;
};

}  // namespace mcdma::peer_auth
