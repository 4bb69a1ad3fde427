#include "mcdma_auth/peer_auth.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

namespace mcdma::peer_auth {
namespace {

constexpr char kHexDigits[] = "0123456789abcdef";
constexpr const char* kMismatchHint =
    " (the hosts' fabric keys differ, or the exchange was altered in transit; compare the key "
    "fingerprints that 'mcdmactl links' shows on both hosts)";

Result<std::string> RandomBytes(size_t n) {
  std::string out(n, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(n)) != 1) {
    return Status(Code::kInternal, "RAND_bytes failed: the OS random source is unavailable");
  }
  return out;
}

std::string ToHex(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(kHexDigits[c >> 4]);
    out.push_back(kHexDigits[c & 15]);
  }
  return out;
}

std::string Sha256(std::string_view data) {
  std::string digest(SHA256_DIGEST_LENGTH, '\0');
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(),
         reinterpret_cast<unsigned char*>(digest.data()));
  return digest;
}

// LP(x): 4-byte big-endian length, then x, so no two field lists encode alike.
void AppendField(std::string& out, std::string_view field) {
  const auto n = static_cast<uint32_t>(field.size());
  out.push_back(static_cast<char>(n >> 24));
  out.push_back(static_cast<char>(n >> 16));
  out.push_back(static_cast<char>(n >> 8));
  out.push_back(static_cast<char>(n));
  out.append(field);
}

// Length is public; the bytes are compared in constant time.
bool ProofMatches(const std::string& expected, const std::string& presented) {
  return presented.size() == expected.size() &&
         CRYPTO_memcmp(expected.data(), presented.data(), expected.size()) == 0;
}

bool IsTicketText(std::string_view ticket) {
  return ticket.size() == kTicketHexChars && std::all_of(ticket.begin(), ticket.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

Status Malformed(const char* message, const std::string& detail) {
  return Status(Code::kInvalid, std::string("malformed ") + message + ": " + detail);
}

Status CheckSize(const char* message, const char* field, const std::string& value,
                 size_t expected) {
  if (value.size() == expected) return Status::Ok();
  return Malformed(message, std::string(field) + " is " + std::to_string(value.size()) +
                                " bytes, expected " + std::to_string(expected));
}

Status CheckVersion(const char* message, uint32_t version) {
  if (version == kVersion) return Status::Ok();
  return Malformed(message, "peer auth version " + std::to_string(version) +
                                " is not supported (this daemon speaks " +
                                std::to_string(kVersion) + ")");
}

Status CheckPeerId(const char* message, const std::string& peer, const std::string& own) {
  Status valid = ValidateHostId(peer);
  if (!valid.ok()) return Malformed(message, valid.message());
  if (peer == own) {
    return Status(Code::kInvalid, Reason::kPeerIdentity,
                  Malformed(message, "the peer claims this host's own id '" + own +
                                         "' (two hosts configured with one host_id, or a "
                                         "reflected exchange)")
                      .message());
  }
  return Status::Ok();
}

Status CheckKey(const std::shared_ptr<const FabricKey>& key) {
  if (key == nullptr || key->empty()) {
    return Status(Code::kInvalid, "peer authentication needs a fabric key; none is loaded");
  }
  return Status::Ok();
}

}  // namespace

std::string ComputeProof(const FabricKey& key, Role role, const Transcript& transcript) {
  std::string input;
  AppendField(input, role == Role::kResponder ? kResponderLabel : kInitiatorLabel);
  AppendField(input, transcript.nonce_i);
  AppendField(input, transcript.nonce_r);
  AppendField(input, transcript.id_i);
  AppendField(input, transcript.id_r);
  std::string mac(kProofBytes, '\0');
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(input.data()), input.size(),
       reinterpret_cast<unsigned char*>(mac.data()), &len);
  mac.resize(len);
  return mac;
}

Status ValidateHostId(std::string_view host_id) {
  if (host_id.empty() || host_id.size() > kMaxHostIdBytes) {
    return Status(Code::kInvalid, "host id is " + std::to_string(host_id.size()) +
                                      " bytes; it must be 1 to " + std::to_string(kMaxHostIdBytes));
  }
  for (size_t i = 0; i < host_id.size(); ++i) {
    const auto c = static_cast<unsigned char>(host_id[i]);
    if (c < 0x21 || c > 0x7e) {
      return Status(Code::kInvalid,
                    "host id byte " + std::to_string(i) + " is not printable ASCII (0x21-0x7e)");
    }
  }
  return Status::Ok();
}

// ---- TicketBook -------------------------------------------------------------

TicketBook::TicketBook(std::chrono::milliseconds ttl, size_t max_per_peer, size_t max_total)
    : ttl_(ttl), max_per_peer_(std::max<size_t>(max_per_peer, 1)), max_total_(max_total) {}

void TicketBook::DropExpiredLocked(Clock::time_point now) {
  std::erase_if(entries_, [now](const auto& kv) { return kv.second.expires <= now; });
}

Result<std::string> TicketBook::Issue(const std::string& peer_host_id, Clock::time_point now) {
  MCDMA_RETURN_IF_ERROR(ValidateHostId(peer_host_id));
  MCDMA_ASSIGN_OR_RETURN(std::string raw, RandomBytes(kTicketBytes));
  std::string ticket = ToHex(raw);
  OPENSSL_cleanse(raw.data(), raw.size());
  MutexLock lock(mu_);
  DropExpiredLocked(now);
  size_t held = 0;
  auto oldest = entries_.end();
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->second.host_id != peer_host_id) continue;
    ++held;
    if (oldest == entries_.end() || it->second.serial < oldest->second.serial) oldest = it;
  }
  if (held >= max_per_peer_) entries_.erase(oldest);
  if (entries_.size() >= max_total_) {
    return Status(Code::kBusy, "too many live peer tickets (" + std::to_string(max_total_) +
                                   "); retry when some expire");
  }
  entries_.emplace(Sha256(ticket), Entry{peer_host_id, now + ttl_, next_serial_++});
  return ticket;
}

Result<std::string> TicketBook::Verify(std::string_view ticket, Clock::time_point now) {
  if (!IsTicketText(ticket)) {
    return Status(Code::kInvalid, "malformed peer ticket: expected " +
                                      std::to_string(kTicketHexChars) +
                                      " lowercase hex characters");
  }
  const std::string digest = Sha256(ticket);
  MutexLock lock(mu_);
  auto it = entries_.find(digest);
  if (it == entries_.end()) {
    return Status(Code::kPermissionDenied, "unknown peer ticket; authenticate first");
  }
  if (it->second.expires <= now) {
    entries_.erase(it);
    return Status(Code::kPermissionDenied, "peer ticket expired; authenticate again");
  }
  return it->second.host_id;
}

void TicketBook::Revoke(std::string_view ticket) {
  if (!IsTicketText(ticket)) return;
  const std::string digest = Sha256(ticket);
  MutexLock lock(mu_);
  entries_.erase(digest);
}

void TicketBook::RevokePeer(const std::string& peer_host_id) {
  MutexLock lock(mu_);
  std::erase_if(entries_, [&](const auto& kv) { return kv.second.host_id == peer_host_id; });
}

size_t TicketBook::size() const {
  MutexLock lock(mu_);
  return entries_.size();
}

// ---- Initiator --------------------------------------------------------------

Initiator::Initiator(std::shared_ptr<const FabricKey> key, Hello hello, std::string expected_peer)
    : key_(std::move(key)), hello_(std::move(hello)), expected_peer_(std::move(expected_peer)) {}

Result<Initiator> Initiator::Create(std::shared_ptr<const FabricKey> key, std::string own_host_id,
                                    std::string expected_peer) {
  MCDMA_RETURN_IF_ERROR(CheckKey(key));
  MCDMA_RETURN_IF_ERROR(ValidateHostId(own_host_id));
  if (!expected_peer.empty()) MCDMA_RETURN_IF_ERROR(ValidateHostId(expected_peer));
  MCDMA_ASSIGN_OR_RETURN(std::string nonce, RandomBytes(kNonceBytes));
  Hello hello{kVersion, std::move(own_host_id), std::move(nonce)};
  return Initiator(std::move(key), std::move(hello), std::move(expected_peer));
}

Status Initiator::Fail(Status status) {
  state_ = State::kFailed;
  return status;
}

Result<Proof> Initiator::OnChallenge(const Challenge& challenge) {
  constexpr const char* kMsg = "AuthChallenge";
  if (state_ != State::kAwaitChallenge) {
    return Fail(Malformed(kMsg, "unexpected at this point of the exchange"));
  }
  Status st = CheckVersion(kMsg, challenge.version);
  if (st.ok()) st = CheckPeerId(kMsg, challenge.host_id, hello_.host_id);
  if (st.ok()) st = CheckSize(kMsg, "nonce", challenge.nonce, kNonceBytes);
  if (st.ok()) st = CheckSize(kMsg, "proof", challenge.proof, kProofBytes);
  if (st.ok() && challenge.nonce == hello_.nonce) {
    st = Malformed(kMsg, "the peer echoed this host's nonce (a reflected exchange)");
  }
  if (!st.ok()) return Fail(std::move(st));
  if (!expected_peer_.empty() && challenge.host_id != expected_peer_) {
    return Fail(Status(Code::kInvalid, Reason::kPeerIdentity,
                       "dialed peer '" + expected_peer_ + "' but it says it is '" +
                           challenge.host_id + "'; check the peer's address and host_id"));
  }
  const Transcript transcript{hello_.nonce, challenge.nonce, hello_.host_id, challenge.host_id};
  if (!ProofMatches(ComputeProof(*key_, Role::kResponder, transcript), challenge.proof)) {
    return Fail(Status(Code::kPermissionDenied, "fabric key mismatch: peer '" + challenge.host_id +
                                                    "' could not prove it holds this fabric's key" +
                                                    kMismatchHint));
  }
  peer_host_id_ = challenge.host_id;
  state_ = State::kAwaitTicket;
  return Proof{ComputeProof(*key_, Role::kInitiator, transcript)};
}

Result<Session> Initiator::OnTicket(const Ticket& ticket) {
  constexpr const char* kMsg = "AuthTicket";
  if (state_ != State::kAwaitTicket) {
    return Fail(Malformed(kMsg, "unexpected at this point of the exchange"));
  }
  if (!IsTicketText(ticket.ticket)) {
    return Fail(Malformed(
        kMsg, "ticket is not " + std::to_string(kTicketHexChars) + " lowercase hex characters"));
  }
  if (ticket.ttl_ms == 0) return Fail(Malformed(kMsg, "ttl_ms is 0"));
  state_ = State::kDone;
  return Session{peer_host_id_, ticket.ticket, std::chrono::milliseconds(ticket.ttl_ms)};
}

// ---- Responder --------------------------------------------------------------

Responder::Responder(std::shared_ptr<const FabricKey> key, std::string own_host_id,
                     std::string nonce)
    : key_(std::move(key)) {
  transcript_.id_r = std::move(own_host_id);
  transcript_.nonce_r = std::move(nonce);
}

Result<Responder> Responder::Create(std::shared_ptr<const FabricKey> key, std::string own_host_id) {
  MCDMA_RETURN_IF_ERROR(CheckKey(key));
  MCDMA_RETURN_IF_ERROR(ValidateHostId(own_host_id));
  MCDMA_ASSIGN_OR_RETURN(std::string nonce, RandomBytes(kNonceBytes));
  return Responder(std::move(key), std::move(own_host_id), std::move(nonce));
}

Status Responder::Fail(Status status) {
  state_ = State::kFailed;
  return status;
}

Result<Challenge> Responder::OnHello(const Hello& hello) {
  constexpr const char* kMsg = "AuthHello";
  if (state_ != State::kAwaitHello) {
    return Fail(Malformed(kMsg, "unexpected at this point of the exchange"));
  }
  Status st = CheckVersion(kMsg, hello.version);
  if (st.ok()) st = CheckPeerId(kMsg, hello.host_id, transcript_.id_r);
  if (st.ok()) st = CheckSize(kMsg, "nonce", hello.nonce, kNonceBytes);
  if (!st.ok()) return Fail(std::move(st));
  transcript_.id_i = hello.host_id;
  transcript_.nonce_i = hello.nonce;
  state_ = State::kAwaitProof;
  return Challenge{kVersion, transcript_.id_r, transcript_.nonce_r,
                   ComputeProof(*key_, Role::kResponder, transcript_)};
}

Result<Ticket> Responder::OnProof(const Proof& proof, TicketBook& book) {
  constexpr const char* kMsg = "AuthProof";
  if (state_ != State::kAwaitProof) {
    return Fail(Malformed(kMsg, "unexpected at this point of the exchange"));
  }
  Status st = CheckSize(kMsg, "proof", proof.proof, kProofBytes);
  if (!st.ok()) return Fail(std::move(st));
  if (!ProofMatches(ComputeProof(*key_, Role::kInitiator, transcript_), proof.proof)) {
    return Fail(Status(Code::kPermissionDenied, "fabric key mismatch: peer '" + transcript_.id_i +
                                                    "' could not prove it holds this fabric's key" +
                                                    kMismatchHint));
  }
  auto ticket = book.Issue(transcript_.id_i);
  if (!ticket.ok()) return Fail(ticket.status());
  state_ = State::kDone;
  return Ticket{std::move(ticket).value(), static_cast<uint64_t>(book.ttl().count())};
}

}  // namespace mcdma::peer_auth
