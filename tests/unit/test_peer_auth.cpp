// Peer authentication: the mutual HMAC exchange between an Initiator and a
// Responder, its failure modes (wrong key, replay, reflection, tampering,
// malformed messages) and the TicketBook.
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <array>
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "mcdma_auth/peer_auth.hpp"

namespace mcdma::peer_auth {
namespace {

using std::chrono::milliseconds;

std::shared_ptr<const FabricKey> NewKey() {
  auto key = FabricKey::Generate();
  EXPECT_TRUE(key.ok());
  return std::make_shared<const FabricKey>(std::move(key).value());
}

std::string Hex(const std::string& bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 15]);
  }
  return out;
}

// The message must not carry the secret-looking bytes, raw or hex.
void ExpectNotLeaked(const Status& st, const std::string& bytes) {
  EXPECT_EQ(st.message().find(bytes), std::string::npos) << st.message();
  EXPECT_EQ(st.message().find(Hex(bytes)), std::string::npos) << st.message();
}

bool StartsWith(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

// One exchange's two ends, set up for hosts "a" (initiator) and "b".
struct Pair {
  Initiator initiator;
  Responder responder;
};

Pair MakePair(std::shared_ptr<const FabricKey> initiator_key,
              std::shared_ptr<const FabricKey> responder_key, const std::string& expected = {}) {
  auto i = Initiator::Create(std::move(initiator_key), "a", expected);
  auto r = Responder::Create(std::move(responder_key), "b");
  EXPECT_TRUE(i.ok() && r.ok());
  return {std::move(i).value(), std::move(r).value()};
}

TEST(PeerAuth, MatchingKeysAuthenticateBothWays) {
  auto key = NewKey();
  for (auto [from, to] : {std::pair{"spark-1", "mac-studio"}, {"mac-studio", "spark-1"}}) {
    TicketBook book;
    auto initiator = Initiator::Create(key, from, to);
    auto responder = Responder::Create(key, to);
    ASSERT_TRUE(initiator.ok() && responder.ok());
    auto challenge = responder->OnHello(initiator->hello());
    ASSERT_TRUE(challenge.ok()) << challenge.status().ToString();
    auto proof = initiator->OnChallenge(*challenge);
    ASSERT_TRUE(proof.ok()) << proof.status().ToString();
    auto ticket = responder->OnProof(*proof, book);
    ASSERT_TRUE(ticket.ok()) << ticket.status().ToString();
    EXPECT_TRUE(responder->authenticated());
    EXPECT_EQ(responder->peer_host_id(), from);
    auto session = initiator->OnTicket(*ticket);
    ASSERT_TRUE(session.ok()) << session.status().ToString();
    EXPECT_EQ(session->peer_host_id, to);
    EXPECT_EQ(session->ttl, book.ttl());
    EXPECT_EQ(session->ticket.size(), kTicketHexChars);
    auto who = book.Verify(session->ticket);
    ASSERT_TRUE(who.ok()) << who.status().ToString();
    EXPECT_EQ(*who, from);
  }
}

TEST(PeerAuth, ResponderWithoutTheKeyCannotProveItself) {
  Pair p = MakePair(NewKey(), NewKey());
  auto challenge = p.responder.OnHello(p.initiator.hello());
  ASSERT_TRUE(challenge.ok());
  auto proof = p.initiator.OnChallenge(*challenge);
  ASSERT_FALSE(proof.ok());
  EXPECT_EQ(proof.status().code(), Code::kPermissionDenied);
  EXPECT_TRUE(StartsWith(proof.status().message(), "fabric key mismatch: peer 'b'"))
      << proof.status().message();
  ExpectNotLeaked(proof.status(), challenge->proof);
  ExpectNotLeaked(proof.status(), challenge->nonce);
  // The initiator is dead: a ticket now (or anything else) is refused.
  EXPECT_EQ(p.initiator.OnTicket(Ticket{std::string(32, 'a'), 1000}).status().code(),
            Code::kInvalid);
}

TEST(PeerAuth, InitiatorWithoutTheKeyGetsNoTicket) {
  auto key = NewKey();
  TicketBook book;
  auto responder = Responder::Create(key, "b");
  ASSERT_TRUE(responder.ok());
  // A keyless initiator cannot check the challenge; the best it can do is a
  // proof under a key of its own choosing, or random bytes.
  Hello hello{kVersion, "a", std::string(kNonceBytes, '\x11')};
  auto challenge = responder->OnHello(hello);
  ASSERT_TRUE(challenge.ok());
  auto wrong = NewKey();
  Proof forged{ComputeProof(*wrong, Role::kInitiator, {hello.nonce, challenge->nonce, "a", "b"})};
  auto ticket = responder->OnProof(forged, book);
  EXPECT_EQ(ticket.status().code(), Code::kPermissionDenied);
  EXPECT_TRUE(StartsWith(ticket.status().message(), "fabric key mismatch: peer 'a'"))
      << ticket.status().message();
  ExpectNotLeaked(ticket.status(), forged.proof);
  EXPECT_EQ(book.size(), 0u);
  // No second try on the same exchange (the nonce would be reused).
  Proof right{ComputeProof(*key, Role::kInitiator, {hello.nonce, challenge->nonce, "a", "b"})};
  EXPECT_EQ(responder->OnProof(right, book).status().code(), Code::kInvalid);
  EXPECT_EQ(book.size(), 0u);
}

TEST(PeerAuth, ReflectedResponderProofIsRefused) {
  auto key = NewKey();
  TicketBook book;
  Pair p = MakePair(key, key);
  auto challenge = p.responder.OnHello(p.initiator.hello());
  ASSERT_TRUE(challenge.ok());
  auto ticket = p.responder.OnProof(Proof{challenge->proof}, book);
  EXPECT_EQ(ticket.status().code(), Code::kPermissionDenied);
  EXPECT_EQ(book.size(), 0u);
}

TEST(PeerAuth, ReflectedNonceAndOwnHostIdAreRefused) {
  auto key = NewKey();
  // An attacker echoing the initiator's nonce and id back at it.
  auto initiator = Initiator::Create(key, "a");
  ASSERT_TRUE(initiator.ok());
  Challenge echo{kVersion, "c", initiator->hello().nonce, std::string(kProofBytes, '\0')};
  auto proof = initiator->OnChallenge(echo);
  EXPECT_EQ(proof.status().code(), Code::kInvalid);
  EXPECT_NE(proof.status().message().find("echoed"), std::string::npos);

  auto again = Initiator::Create(key, "a");
  ASSERT_TRUE(again.ok());
  Challenge same_id{kVersion, "a", std::string(kNonceBytes, '\x22'), std::string(kProofBytes, 0)};
  EXPECT_NE(again->OnChallenge(same_id).status().message().find("this host's own id 'a'"),
            std::string::npos);

  auto responder = Responder::Create(key, "b");
  ASSERT_TRUE(responder.ok());
  auto challenge = responder->OnHello(Hello{kVersion, "b", std::string(kNonceBytes, '\x33')});
  EXPECT_EQ(challenge.status().code(), Code::kInvalid);
}

TEST(PeerAuth, ReplayedProofFailsInANewExchange) {
  auto key = NewKey();
  TicketBook book;
  Pair first = MakePair(key, key);
  const Hello hello = first.initiator.hello();
  auto challenge = first.responder.OnHello(hello);
  ASSERT_TRUE(challenge.ok());
  auto proof = first.initiator.OnChallenge(*challenge);
  ASSERT_TRUE(proof.ok());
  ASSERT_TRUE(first.responder.OnProof(*proof, book).ok());

  // An eavesdropper replays the recorded hello and proof to a new responder.
  auto responder = Responder::Create(key, "b");
  ASSERT_TRUE(responder.ok());
  auto fresh = responder->OnHello(hello);
  ASSERT_TRUE(fresh.ok());
  EXPECT_NE(fresh->nonce, challenge->nonce);
  EXPECT_EQ(responder->OnProof(*proof, book).status().code(), Code::kPermissionDenied);
  EXPECT_EQ(book.size(), 1u);

  // ... or the recorded challenge to a new initiator.
  auto initiator = Initiator::Create(key, "a");
  ASSERT_TRUE(initiator.ok());
  EXPECT_EQ(initiator->OnChallenge(*challenge).status().code(), Code::kPermissionDenied);
}

TEST(PeerAuth, TamperedFieldsFailTheProof) {
  auto key = NewKey();
  enum class Tamper { kHelloNonce, kHelloHostId, kChallengeNonce, kChallengeHostId, kProof };
  for (Tamper t : {Tamper::kHelloNonce, Tamper::kHelloHostId, Tamper::kChallengeNonce,
                   Tamper::kChallengeHostId, Tamper::kProof}) {
    SCOPED_TRACE(static_cast<int>(t));
    TicketBook book;
    Pair p = MakePair(key, key);
    Hello hello = p.initiator.hello();
    if (t == Tamper::kHelloNonce) hello.nonce[0] ^= 1;
    if (t == Tamper::kHelloHostId) hello.host_id = "c";
    auto challenge = p.responder.OnHello(hello);
    ASSERT_TRUE(challenge.ok());
    if (t == Tamper::kChallengeNonce) challenge->nonce[31] ^= 0x80;
    if (t == Tamper::kChallengeHostId) challenge->host_id = "d";
    auto proof = p.initiator.OnChallenge(*challenge);
    if (t != Tamper::kProof) {
      EXPECT_EQ(proof.status().code(), Code::kPermissionDenied) << proof.status().ToString();
      continue;
    }
    ASSERT_TRUE(proof.ok());
    proof->proof[7] ^= 4;
    EXPECT_EQ(p.responder.OnProof(*proof, book).status().code(), Code::kPermissionDenied);
    EXPECT_EQ(book.size(), 0u);
  }
}

TEST(PeerAuth, MalformedMessagesSayMalformed) {
  auto key = NewKey();
  const std::string nonce(kNonceBytes, '\x44');
  for (const Hello& hello : {
           Hello{kVersion, "a", nonce.substr(1)},
           Hello{kVersion, "a", nonce + "x"},
           Hello{2, "a", nonce},
           Hello{kVersion, "", nonce},
           Hello{kVersion, "has space", nonce},
           Hello{kVersion, std::string(256, 'h'), nonce},
           Hello{kVersion, std::string("nul\0id", 6), nonce},
       }) {
    auto responder = Responder::Create(key, "b");
    ASSERT_TRUE(responder.ok());
    auto challenge = responder->OnHello(hello);
    EXPECT_EQ(challenge.status().code(), Code::kInvalid);
    EXPECT_TRUE(StartsWith(challenge.status().message(), "malformed AuthHello: "))
        << challenge.status().message();
  }
  for (const Challenge& c : {
           Challenge{kVersion, "b", nonce, std::string(kProofBytes - 1, '\0')},
           Challenge{kVersion, "b", nonce.substr(2), std::string(kProofBytes, '\0')},
           Challenge{0, "b", nonce, std::string(kProofBytes, '\0')},
       }) {
    auto initiator = Initiator::Create(key, "a");
    ASSERT_TRUE(initiator.ok());
    auto proof = initiator->OnChallenge(c);
    EXPECT_EQ(proof.status().code(), Code::kInvalid);
    EXPECT_TRUE(StartsWith(proof.status().message(), "malformed AuthChallenge: "))
        << proof.status().message();
  }
  TicketBook book;
  Pair p = MakePair(key, key);
  ASSERT_TRUE(p.responder.OnHello(p.initiator.hello()).ok());
  auto ticket = p.responder.OnProof(Proof{std::string(kProofBytes + 1, '\0')}, book);
  EXPECT_TRUE(StartsWith(ticket.status().message(), "malformed AuthProof: "))
      << ticket.status().message();
}

TEST(PeerAuth, MalformedTicketIsRefusedByTheInitiator) {
  auto key = NewKey();
  for (const Ticket& bad : {Ticket{std::string(32, 'A'), 1000}, Ticket{std::string(31, 'a'), 1000},
                            Ticket{std::string(32, 'a'), 0}}) {
    TicketBook book;
    Pair p = MakePair(key, key);
    auto challenge = p.responder.OnHello(p.initiator.hello());
    ASSERT_TRUE(challenge.ok());
    ASSERT_TRUE(p.initiator.OnChallenge(*challenge).ok());
    auto session = p.initiator.OnTicket(bad);
    EXPECT_EQ(session.status().code(), Code::kInvalid);
    EXPECT_TRUE(StartsWith(session.status().message(), "malformed AuthTicket: "));
  }
}

TEST(PeerAuth, StepsOutOfOrderFail) {
  auto key = NewKey();
  TicketBook book;
  Pair p = MakePair(key, key);
  EXPECT_EQ(p.responder.OnProof(Proof{std::string(kProofBytes, '\0')}, book).status().code(),
            Code::kInvalid);
  // The failed responder stays failed.
  EXPECT_EQ(p.responder.OnHello(p.initiator.hello()).status().code(), Code::kInvalid);

  Pair q = MakePair(key, key);
  EXPECT_EQ(q.initiator.OnTicket(Ticket{std::string(32, 'a'), 1}).status().code(), Code::kInvalid);
  ASSERT_TRUE(q.responder.OnHello(q.initiator.hello()).ok());
  EXPECT_EQ(q.responder.OnHello(q.initiator.hello()).status().code(), Code::kInvalid);
}

TEST(PeerAuth, DialingTheWrongHostIsAConfigurationError) {
  auto key = NewKey();
  Pair p = MakePair(key, key, "spark-2");
  auto challenge = p.responder.OnHello(p.initiator.hello());
  ASSERT_TRUE(challenge.ok());
  auto proof = p.initiator.OnChallenge(*challenge);
  EXPECT_EQ(proof.status().code(), Code::kInvalid);
  EXPECT_EQ(proof.status().message(),
            "dialed peer 'spark-2' but it says it is 'b'; check the peer's address and host_id");
}

TEST(PeerAuth, CreateNeedsAKeyAndAValidHostId) {
  EXPECT_EQ(Initiator::Create(nullptr, "a").status().code(), Code::kInvalid);
  EXPECT_EQ(Responder::Create(nullptr, "b").status().code(), Code::kInvalid);
  auto key = NewKey();
  EXPECT_EQ(Initiator::Create(key, "").status().code(), Code::kInvalid);
  EXPECT_EQ(Responder::Create(key, "b c").status().code(), Code::kInvalid);
  EXPECT_EQ(Initiator::Create(key, "a", "bad id").status().code(), Code::kInvalid);
}

TEST(PeerAuth, NoncesAreFreshPerExchange) {
  auto key = NewKey();
  Pair p = MakePair(key, key);
  Pair q = MakePair(key, key);
  EXPECT_EQ(p.initiator.hello().nonce.size(), kNonceBytes);
  EXPECT_NE(p.initiator.hello().nonce, q.initiator.hello().nonce);
  auto cp = p.responder.OnHello(p.initiator.hello());
  auto cq = q.responder.OnHello(p.initiator.hello());
  ASSERT_TRUE(cp.ok() && cq.ok());
  EXPECT_EQ(cp->nonce.size(), kNonceBytes);
  EXPECT_NE(cp->nonce, cq->nonce);
  EXPECT_NE(cp->proof, cq->proof);
}

// The MAC, rebuilt independently from the documented construction.
TEST(PeerAuth, ProofIsHmacOverLengthPrefixedTranscript) {
  std::array<uint8_t, 32> raw{};
  for (size_t i = 0; i < raw.size(); ++i) raw[i] = static_cast<uint8_t>(0xa0 + i);
  FabricKey key = FabricKey::FromBytes(raw);
  const Transcript t{std::string(32, 'N'), std::string(32, 'R'), "spark-1", "mac"};
  auto lp = [](const std::string& s) {
    const auto n = static_cast<uint32_t>(s.size());
    return std::string{static_cast<char>(n >> 24), static_cast<char>(n >> 16),
                       static_cast<char>(n >> 8), static_cast<char>(n)} +
           s;
  };
  for (auto [role, label] : {std::pair{Role::kResponder, "mcdma-peer-v1 responder"},
                             std::pair{Role::kInitiator, "mcdma-peer-v1 initiator"}}) {
    const std::string input = lp(label) + lp(t.nonce_i) + lp(t.nonce_r) + lp(t.id_i) + lp(t.id_r);
    std::array<unsigned char, 32> mac{};
    unsigned int len = 0;
    HMAC(EVP_sha256(), raw.data(), static_cast<int>(raw.size()),
         reinterpret_cast<const unsigned char*>(input.data()), input.size(), mac.data(), &len);
    ASSERT_EQ(len, 32u);
    EXPECT_EQ(ComputeProof(key, role, t), std::string(mac.begin(), mac.end()));
  }
  // Length prefixes keep ("ab", "c") and ("a", "bc") apart.
  const Transcript x{t.nonce_i, t.nonce_r, "ab", "c"};
  const Transcript y{t.nonce_i, t.nonce_r, "a", "bc"};
  EXPECT_NE(ComputeProof(key, Role::kInitiator, x), ComputeProof(key, Role::kInitiator, y));
  EXPECT_NE(ComputeProof(key, Role::kInitiator, t), ComputeProof(key, Role::kResponder, t));
}

// ---- TicketBook ---------------------------------------------------------------

TEST(TicketBook, IssuedTicketNamesItsPeerUntilItExpires) {
  TicketBook book(milliseconds(1000));
  const auto t0 = TicketBook::Clock::now();
  auto ticket = book.Issue("spark-1", t0);
  ASSERT_TRUE(ticket.ok());
  EXPECT_EQ(ticket->size(), kTicketHexChars);
  auto who = book.Verify(*ticket, t0 + milliseconds(999));
  ASSERT_TRUE(who.ok());
  EXPECT_EQ(*who, "spark-1");
  auto expired = book.Verify(*ticket, t0 + milliseconds(1000));
  EXPECT_EQ(expired.status().code(), Code::kPermissionDenied);
  EXPECT_EQ(expired.status().message(), "peer ticket expired; authenticate again");
  EXPECT_EQ(book.size(), 0u);
  // Dropped: now simply unknown, even at an earlier time.
  EXPECT_EQ(book.Verify(*ticket, t0).status().message(), "unknown peer ticket; authenticate first");
}

TEST(TicketBook, UnknownAndMalformedTicketsFail) {
  TicketBook book;
  ASSERT_TRUE(book.Issue("spark-1").ok());
  auto unknown = book.Verify(std::string(32, '0'));
  EXPECT_EQ(unknown.status().code(), Code::kPermissionDenied);
  for (const char* bad :
       {"", "0123", "0123456789ABCDEF0123456789ABCDEF", "0123456789abcdef0123456789abcdef0",
        "0123456789abcdef0123456789abcdeg"}) {
    EXPECT_EQ(book.Verify(bad).status().code(), Code::kInvalid) << bad;
  }
  EXPECT_EQ(book.Issue("").status().code(), Code::kInvalid);
}

TEST(TicketBook, RevokeForgetsTicketsAndPeers) {
  TicketBook book;
  auto a1 = book.Issue("a");
  auto a2 = book.Issue("a");
  auto b1 = book.Issue("b");
  ASSERT_TRUE(a1.ok() && a2.ok() && b1.ok());
  EXPECT_NE(*a1, *a2);
  book.Revoke(*a1);
  EXPECT_FALSE(book.Verify(*a1).ok());
  EXPECT_TRUE(book.Verify(*a2).ok());
  book.RevokePeer("a");
  EXPECT_FALSE(book.Verify(*a2).ok());
  EXPECT_TRUE(book.Verify(*b1).ok());
  EXPECT_EQ(book.size(), 1u);
}

TEST(TicketBook, PerPeerLimitEvictsTheOldestAndTotalLimitIsBusy) {
  TicketBook book(milliseconds(60'000), 2, 3);
  auto a1 = book.Issue("a");
  auto a2 = book.Issue("a");
  auto a3 = book.Issue("a");
  ASSERT_TRUE(a1.ok() && a2.ok() && a3.ok());
  EXPECT_FALSE(book.Verify(*a1).ok());
  EXPECT_TRUE(book.Verify(*a2).ok());
  EXPECT_TRUE(book.Verify(*a3).ok());
  ASSERT_TRUE(book.Issue("b").ok());
  EXPECT_EQ(book.Issue("c").status().code(), Code::kBusy);
  // Expired tickets make room.
  EXPECT_TRUE(book.Issue("c", TicketBook::Clock::now() + milliseconds(60'001)).ok());
  EXPECT_EQ(book.size(), 1u);
}

TEST(TicketBook, ConcurrentIssueAndVerify) {
  TicketBook book(milliseconds(60'000), 1000, 100'000);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  threads.reserve(4);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&book, &failures, t] {
      const std::string peer = "host-" + std::to_string(t);
      for (int i = 0; i < 200; ++i) {
        auto ticket = book.Issue(peer);
        if (!ticket.ok()) {
          ++failures;
          continue;
        }
        auto who = book.Verify(*ticket);
        if (!who.ok() || *who != peer) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(book.size(), 800u);
}

}  // namespace
}  // namespace mcdma::peer_auth
