// Writes the fuzzers' seed corpora (fuzz/corpus/<target>/) and the options
// dictionary (fuzz/dict/options.dict) from the project's own encoders and
// layouts: valid submissions, link messages, tcp frames, verbs endpoint
// descriptions, peer messages, a config written from the option table, a
// key file written as `mcdmactl fabric-key new` writes one.
//
// Run from the repository root after `scripts/fuzz.sh build`:
//   build-asan/fuzz/fuzz_make_corpus fuzz
// (The KV manifest's seeds are recorded messages; docs/fuzzing.md.)
#include <array>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "config/option_table.hpp"
#include "config/options.hpp"
#include "driver/tcp/tcp_frame.hpp"
#include "driver/verbs/verbs_wire.hpp"
#include "engine/link_wire.hpp"
#include "engine/route_wire.hpp"
#include "mcdma/v1/peer.pb.h"
#include "mcdma_auth/fabric_key.hpp"
#include "mcdma_internal/mailbox_layout.hpp"

namespace {

namespace fs = std::filesystem;
using Bytes = std::string;
using namespace mcdma;

fs::path out_root;

void Write(const std::string& target, const std::string& name, const Bytes& bytes) {
  fs::path dir = out_root / "corpus" / target;
  fs::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary) << bytes;
}

void PutLe(Bytes& out, uint64_t v, size_t n) {
  for (size_t i = 0; i < n; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

template <typename T>
Bytes Raw(const T& v) {
  return Bytes(reinterpret_cast<const char*>(&v), sizeof(v));
}

// ---- submit: flags, arena bytes, descriptors (fuzz_submit.cpp) ----
shm::SubmitDesc Desc(shm::Op op, uint64_t tag) {
  shm::SubmitDesc d{};
  d.opcode = static_cast<uint8_t>(op);
  d.tag = tag;
  return d;
}

Bytes Submissions(const std::vector<shm::SubmitDesc>& descs, const Bytes& arena = "request") {
  Bytes out;
  PutLe(out, 0, 1);
  PutLe(out, arena.size(), 2);
  out += arena;
  for (const auto& d : descs) out += Raw(d);
  return out;
}

void SubmitCorpus() {
  constexpr uint32_t kDaemonHalf = 32 << 10;  // FuzzEngine's arena: 64 KiB, two halves
  auto nop = Desc(shm::Op::kNop, 1);
  auto call = Desc(shm::Op::kCall, 2);
  call.target = 1;  // the session's service
  call.payload_len = 7;
  auto notify = Desc(shm::Op::kNotify, 3);
  notify.target = 1;
  notify.payload_len = 7;
  auto reply = Desc(shm::Op::kReply, 4);
  reply.target = 5;  // the first call delivered to the inbox
  reply.payload_len = 7;
  auto read = Desc(shm::Op::kRead, 5);
  read.target = 3;  // the handle
  read.local_buffer = 2;
  read.length = 4096;
  auto write = Desc(shm::Op::kWrite, 6);
  write.target = 3;
  write.local_buffer = 2;
  write.local_offset = 4096;
  write.remote_offset = 128;
  write.length = 1024;
  auto release = Desc(shm::Op::kRelease, 7);
  release.payload_off = kDaemonHalf;
  release.payload_len = 7;
  Write("submit", "nop", Submissions({nop}));
  Write("submit", "call", Submissions({call}));
  Write("submit", "notify", Submissions({notify}));
  Write("submit", "read_write", Submissions({read, write}));
  // A call to ourselves, delivered, answered, and its payload handed back.
  std::vector<shm::SubmitDesc> batch(8, nop);
  batch[0] = call;
  Write("submit", "call_reply_release", Submissions(batch) + Raw(reply) + Raw(release));
  Bytes wild = Submissions({nop});
  wild[0] = 1;  // kFlagWildTail: the tail follows
  wild.insert(1, Bytes("\x40\x00\x00\x00", 4));
  Write("submit", "wild_tail", wild);
}

// ---- link_wire: u16-prefixed fragments (fuzz_link_wire.cpp) ----
Bytes Fragment(daemon::link_wire::Header h, const Bytes& payload) {
  Bytes out(daemon::link_wire::kHeaderBytes, '\0');
  daemon::link_wire::Encode(h, reinterpret_cast<std::byte*>(out.data()));
  out += payload;
  Bytes framed;
  PutLe(framed, out.size(), 2);
  return framed + out;
}

// Sequence numbers of the corpus' messages, in order from 1 as a peer sends them.
uint64_t next_seq = 1;

Bytes Message(daemon::link_wire::MsgType type, uint64_t id, uint64_t target, const Bytes& payload,
              uint16_t status = 0) {
  daemon::link_wire::Header h;
  h.seq = type == daemon::link_wire::MsgType::kAck ? 0 : next_seq++;
  h.type = type;
  h.id = id;
  h.target = target;
  h.status = status;
  h.total_len = static_cast<uint32_t>(payload.size());
  h.timeout_us = type == daemon::link_wire::MsgType::kCall ? 1000000 : 0;
  return Fragment(h, payload);
}

void LinkCorpus() {
  using daemon::link_wire::MsgType;
  next_seq = 1;
  Write("link_wire", "call", Message(MsgType::kCall, 9, 1, "request"));
  Write("link_wire", "notify", Message(MsgType::kNotify, 10, 1, "note"));
  Write("link_wire", "reply", Message(MsgType::kReply, 11, 0, "answer"));
  Write("link_wire", "reply_error", Message(MsgType::kReply, 12, 0, "no such thing", 3));
  Write("link_wire", "revoke", Message(MsgType::kRevoke, 0, 2, ""));
  Write("link_wire", "revoke_ack", Message(MsgType::kRevokeAck, 0, 2, ""));
  Write("link_wire", "echo", Message(MsgType::kEcho, 13, 0, "ping"));
  Write("link_wire", "echo_reply", Message(MsgType::kEchoReply, 14, 0, "pong"));
  Write("link_wire", "ack", Message(MsgType::kAck, 0, 0, ""));
  // A call, the same call again (sent again after a rail failed), one
  // ahead of its turn, then the one it waited for.
  next_seq = 1;
  Bytes call = Message(MsgType::kCall, 17, 1, "request");
  next_seq = 3;
  Bytes early = Message(MsgType::kNotify, 19, 1, "early");
  next_seq = 2;
  Bytes turn = Message(MsgType::kNotify, 20, 1, "turn");
  Write("link_wire", "resent_and_early", call + call + early + turn);
  // One message in two fragments, then a call.
  next_seq = 1;
  daemon::link_wire::Header h;
  h.type = MsgType::kEcho;
  h.id = 15;
  h.seq = next_seq++;
  h.total_len = 10;
  Bytes two = Fragment(h, "hello");
  h.frag_off = 5;
  two += Fragment(h, "world");
  Write("link_wire", "fragments", two + Message(MsgType::kCall, 16, 1, "request"));
  // Routed envelopes (route_wire.hpp): a call for this host from the
  // link's peer, one from a host further away, and one to relay on.
  daemon::link_wire::Header inner;
  inner.type = MsgType::kCall;
  inner.id = 21;
  inner.target = 1;
  inner.seq = 1;
  inner.timeout_us = 1000000;
  Bytes req = "routed request";
  auto envelope = [&](uint8_t hops, const char* origin, const char* dest) {
    return daemon::route_wire::Encode(hops, origin, dest, "fuzz-instance", "", 1, 0, inner,
                                      {reinterpret_cast<const std::byte*>(req.data()), req.size()});
  };
  next_seq = 1;
  Write("link_wire", "routed_call",
        Message(MsgType::kRouted, 0, 0, envelope(0, "fuzz-peer", "fuzz-host")));
  next_seq = 1;
  Write("link_wire", "routed_far",
        Message(MsgType::kRouted, 0, 0, envelope(2, "host-z", "fuzz-host")));
  next_seq = 1;
  Write("link_wire", "routed_relay",
        Message(MsgType::kRouted, 0, 0, envelope(1, "host-z", "host-y")));
  // Routed transfers (route_wire.hpp, protocol.md §20.1): a resolution, a
  // WRITE piece with its bytes, a READ piece, and an answer to a piece.
  auto routed = [&](MsgType type, uint64_t id, uint64_t target, uint64_t seq, const Bytes& body) {
    daemon::link_wire::Header in;
    in.type = type;
    in.id = id;
    in.target = target;
    in.seq = seq;
    return Message(
        MsgType::kRouted, 0, 0,
        daemon::route_wire::Encode(0, "fuzz-peer", "fuzz-host", "fuzz-instance", "", 1, 0, in,
                                   {reinterpret_cast<const std::byte*>(body.data()), body.size()}));
  };
  auto piece = [](daemon::route_wire::PieceKind kind, uint64_t offset, uint64_t length) {
    Bytes head(daemon::route_wire::kPieceHeadBytes, '\0');
    daemon::route_wire::EncodePieceHead({kind, offset, length},
                                        reinterpret_cast<std::byte*>(head.data()));
    return head;
  };
  next_seq = 1;
  Bytes resolve = routed(MsgType::kResolve, 31, 0, 1, "fuzz-export");
  Bytes write = routed(MsgType::kPiece, 32, 2, 2,
                       piece(daemon::route_wire::PieceKind::kWrite, 64, 16) + Bytes(16, 'w'));
  Bytes read =
      routed(MsgType::kPiece, 33, 2, 3, piece(daemon::route_wire::PieceKind::kRead, 0, 32));
  Write("link_wire", "routed_transfer", resolve + write + read);
  next_seq = 1;
  Write("link_wire", "routed_piece_reply",
        routed(MsgType::kPieceReply, 34, 0, 1,
               piece(daemon::route_wire::PieceKind::kRead, 0, 8) + Bytes(8, 'r')));
}

// ---- tcp_frames: a data connection's bytes (fuzz_tcp_frames.cpp) ----
Bytes Frame(driver::tcp::FrameHeader h, const Bytes& payload = "") {
  h.length =
      h.type == driver::tcp::FrameType::kReadReq ? h.length : static_cast<uint32_t>(payload.size());
  auto header = driver::tcp::EncodeHeader(h);
  return Bytes(reinterpret_cast<const char*>(header.data()), header.size()) + payload;
}

void TcpCorpus() {
  using driver::tcp::FrameType;
  Bytes credit(8, '\0');
  driver::tcp::StoreLe32(reinterpret_cast<std::byte*>(credit.data()), 4096);
  driver::tcp::StoreLe32(reinterpret_cast<std::byte*>(credit.data() + 4), 4096);
  Bytes call = Message(daemon::link_wire::MsgType::kCall, 9, 1, "request").substr(2);
  Write("tcp_frames", "send", Frame({.type = FrameType::kSend, .wr_id = 1}, call));
  Write("tcp_frames", "credit", Frame({.type = FrameType::kCredit}, credit));
  Write(
      "tcp_frames", "write",
      Frame({.type = FrameType::kWrite, .rkey = 1, .wr_id = 1, .remote_addr = 64}, Bytes(32, 'w')));
  Write(
      "tcp_frames", "read_req",
      Frame({.type = FrameType::kReadReq, .rkey = 1, .wr_id = 2, .remote_addr = 0, .length = 128}));
  // Answers to our WRITE (seq 1) and READ (seq 2), after credits for them.
  Write("tcp_frames", "answers",
        Frame({.type = FrameType::kCredit}, credit) +
            Frame({.type = FrameType::kWriteAck, .wr_id = 1}) +
            Frame({.type = FrameType::kReadResp, .wr_id = 2}, Bytes(64, 'r')));
  Write("tcp_frames", "heartbeat_close",
        Frame({.type = FrameType::kHeartbeat}) + Frame({.type = FrameType::kClose}));
  driver::tcp::Token a{}, b{};
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = static_cast<uint8_t>(i);
    b[i] = static_cast<uint8_t>(0xf0 - i);
  }
  auto hello = driver::tcp::EncodeHello(a, b);
  Write("tcp_frames", "hello", Bytes(reinterpret_cast<const char*>(hello.data()), hello.size()));
  Write("tcp_frames", "endpoint_info",
        driver::tcp::EncodeEndpointInfo({.address = "10.0.0.2", .port = 7472, .token = a}));
}

// ---- verbs_wire: selector, then bytes (fuzz_verbs_wire.cpp) ----
void VerbsCorpus() {
  using namespace driver::verbs;
  EndpointInfo info;
  info.profile = "linux-rc";
  info.device = "rxe0";
  info.qpn = 0x11;
  info.psn = 0x123456;
  info.gid = Bytes(10, '\0') + "\xff\xff\x0a\x00\x00\x02";
  info.mtu = 4096;
  info.slot_bytes = 65536;
  info.depth = 64;
  info.max_outstanding = 128;
  info.max_reads = 16;
  info.max_read_bytes = 1 << 30;
  info.max_transfer_bytes = 1 << 30;
  Write("verbs_wire", "endpoint_rc", Bytes(1, '\0') + EncodeEndpoint(info));
  info.unreliable = true;
  info.profile = "apple-tb5";
  Write("verbs_wire", "endpoint_uc", Bytes(1, '\0') + EncodeEndpoint(info));
  auto header = [](WireHeader h, const Bytes& rest) {
    Bytes out(1, '\1');
    Bytes hb(kWireHeaderBytes, '\0');
    EncodeHeader(h, reinterpret_cast<std::byte*>(hb.data()));
    PutLe(out, kWireHeaderBytes + rest.size(), 4);
    return out + hb + rest;
  };
  Write("verbs_wire", "data", header({.type = WireType::kData, .posted = 3, .length = 5}, "hello"));
  Write("verbs_wire", "credit", header({.type = WireType::kCredit, .posted = 64}, ""));
  Write("verbs_wire", "hello",
        header({.type = WireType::kHello, .flags = kFlagSeenPeer, .posted = 64}, ""));
  OpHeader op{.op_id = 1, .rkey = 0x1234, .addr = 4096, .offset = 0, .total = 8, .status = 0};
  Bytes ob(kOpHeaderBytes, '\0');
  EncodeOp(op, reinterpret_cast<std::byte*>(ob.data()));
  Write("verbs_wire", "write_data",
        header({.type = WireType::kWriteData,
                .posted = 1,
                .length = static_cast<uint32_t>(kOpHeaderBytes + 8)},
               ob + "12345678"));
}

// ---- peer: kind, u16 length, message (fuzz_peer.cpp) ----
Bytes Record(uint8_t kind, const Bytes& body) {
  Bytes out(1, static_cast<char>(kind));
  PutLe(out, body.size(), 2);
  return out + body;
}

Bytes Prefixed(const Bytes& body) {
  Bytes out;
  PutLe(out, body.size(), 2);
  return out + body;
}

void PeerCorpus() {
  v1::AuthRequest hello;
  hello.mutable_hello()->set_version(1);
  hello.mutable_hello()->set_host_id("peer-b");
  hello.mutable_hello()->set_nonce(Bytes(32, 'n'));
  Bytes auth = Record(1, hello.SerializeAsString());

  v1::PeerHelloRequest hi;
  hi.add_protocol_versions(1);
  hi.set_host_id("peer-b");
  hi.set_daemon_version("0.1.0");
  hi.add_capabilities("one-sided");
  auto* t = hi.add_transports();
  t->set_name("tcp");
  hi.set_instance_id(Bytes(32, 'a'));
  hi.set_listen_port(7471);
  hi.set_listen_host("127.0.0.1");
  Bytes hello_rec = Record(3, hi.SerializeAsString());

  driver::tcp::Token token{};
  token.fill(0x42);
  v1::PeerConnectRequest connect;
  connect.set_transport("tcp");
  connect.set_endpoint_info(
      driver::tcp::EncodeEndpointInfo({.address = "0.0.0.0", .port = 7472, .token = token}));
  connect.set_generation(1);
  connect.set_slot_bytes(4096);
  v1::PeerResolveExportRequest resolve;
  resolve.set_name("fuzz.exp");
  resolve.set_transport("tcp");
  v1::PeerLookupServiceRequest lookup;
  lookup.set_service("fuzz.svc");
  v1::PeerHeartbeatRequest beat;
  beat.set_generation(1);
  beat.set_sent(3);
  beat.set_received(2);
  beat.set_timestamp_ns(1000);
  beat.set_rtt_us(12.5);
  v1::PeerGoodbyeRequest bye;
  bye.set_reason(v1::PEER_GOODBYE_REASON_SHUTDOWN);
  bye.set_detail("stopping");

  Write("peer", "authenticate", auth);
  Write("peer", "hello", auth + hello_rec);
  Write("peer", "connect", auth + hello_rec + Record(4, connect.SerializeAsString()));
  Write("peer", "resolve_lookup",
        auth + Record(5, resolve.SerializeAsString()) + Record(6, lookup.SerializeAsString()));
  Write(
      "peer", "heartbeat_goodbye",
      auth + hello_rec + Record(7, beat.SerializeAsString()) + Record(8, bye.SerializeAsString()));
  Write("peer", "no_ticket",
        hello_rec + Record(9, Bytes(32, 'f')) + Record(6, lookup.SerializeAsString()));
  v1::AuthRequest proof;
  proof.mutable_proof()->set_proof(Bytes(32, 'p'));
  Write("peer", "wrong_proof",
        Record(0, Prefixed(hello.SerializeAsString()) + proof.SerializeAsString()));
  v1::AuthResponse challenge, ticket;
  challenge.mutable_challenge()->set_version(1);
  challenge.mutable_challenge()->set_host_id("peer-b");
  challenge.mutable_challenge()->set_nonce(Bytes(32, 'r'));
  challenge.mutable_challenge()->set_proof(Bytes(32, 'q'));
  ticket.mutable_ticket()->set_ticket(Bytes(32, '0'));
  ticket.mutable_ticket()->set_ttl_ms(3600000);
  Write("peer", "initiator",
        Record(2, Bytes(1, '\1') + Prefixed(challenge.SerializeAsString()) +
                      ticket.SerializeAsString()));
}

// ---- options: TOML from the option table, and a dictionary of its keys ----
void OptionsCorpus() {
  daemon::Options defaults;
  defaults.socket = "/run/mcdma/rpcd.sock";
  defaults.host_id = "host-a";
  std::map<std::string, std::string> sections;
  Bytes dict;
  for (const daemon::OptionSpec& row : daemon::OptionTable()) {
    std::string key(row.key);
    std::string section, name = key;
    if (auto dot = key.find('.'); dot != std::string::npos) {
      section = key.substr(0, dot);
      name = key.substr(dot + 1);
    }
    std::string value = daemon::OptionValueText(row, defaults);
    if (std::holds_alternative<std::string daemon::Options::*>(row.field)) {
      if (value.empty()) continue;
      value = "\"" + value + "\"";
    }
    sections[section] += name + " = " + value + "\n";
    dict += "\"" + name + "\"\n";
    if (!section.empty()) dict += "\"[" + section + "]\"\n";
  }
  Bytes toml = sections[""];
  for (const auto& [section, body] : sections) {
    if (!section.empty()) toml += "\n[" + section + "]\n" + body;
  }
  toml += "\n[[peer]]\nname = \"host-b\"\naddress = \"10.0.0.2:7471\"\ntransport = \"tcp\"\n";
  dict += "\"[[peer]]\"\n\"name\"\n\"address\"\n\"transport\"\n\"true\"\n\"false\"\n";
  Write("options", "all_keys.toml", toml);
  std::ifstream example(out_root.parent_path() / "systemd" / "rpcd.toml.example", std::ios::binary);
  Write("options", "rpcd.toml.example",
        Bytes(std::istreambuf_iterator<char>(example), std::istreambuf_iterator<char>()));
  fs::create_directories(out_root / "dict");
  std::ofstream(out_root / "dict" / "options.dict", std::ios::binary) << dict;
}

// ---- fabric_key: as WriteNewFabricKey writes one ----
void KeyCorpus() {
  fs::path tmp = fs::temp_directory_path() / ("mcdma-corpus-key-" + std::to_string(getpid()));
  fs::remove(tmp);
  if (!WriteNewFabricKey(tmp.string(), false).ok()) std::abort();
  std::ifstream in(tmp, std::ios::binary);
  Bytes key((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  fs::remove(tmp);
  Write("fabric_key", "key_newline", key);
  Bytes upper = key.substr(0, 64);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  Write("fabric_key", "key_upper_no_newline", upper);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s FUZZ_DIR (the repository's fuzz/)\n", argv[0]);
    return 2;
  }
  out_root = fs::absolute(argv[1]);
  SubmitCorpus();
  LinkCorpus();
  TcpCorpus();
  VerbsCorpus();
  PeerCorpus();
  OptionsCorpus();
  KeyCorpus();
  return 0;
}
