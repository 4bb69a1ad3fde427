// EtcdClient: the URL, the channels and the unary calls (leases, keys,
// listings, compaction). Watches are in etcd_watch.cpp; what both use is
// declared in etcd_internal.hpp and defined here.
#include "fabric/etcd_client.hpp"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "etcd/rpc.grpc.pb.h"
#include "fabric/etcd_internal.hpp"

namespace mcdma::daemon::fabric {
namespace {

constexpr size_t kMaxEndpoints = 16;
constexpr size_t kMaxShownKey = 96;

std::chrono::system_clock::time_point Deadline(std::chrono::milliseconds timeout) {
  return std::chrono::system_clock::now() + timeout;
}

std::string LeaseName(int64_t lease) {
  char hex[24];
  std::snprintf(hex, sizeof(hex), "%llx", static_cast<unsigned long long>(lease));
  return std::string("lease ") + hex;
}

const char* StateName(grpc_connectivity_state state) {
  switch (state) {
    case GRPC_CHANNEL_IDLE:
      return "idle";
    case GRPC_CHANNEL_CONNECTING:
      return "connecting";
    case GRPC_CHANNEL_READY:
      return "ready";
    case GRPC_CHANNEL_TRANSIENT_FAILURE:
      return "failing to connect";
    default:
      return "shut down";
  }
}

Status CheckPut(const std::string& key, const std::string& value, const std::string& op) {
  MCDMA_RETURN_IF_ERROR(etcd_internal::CheckKey(key, op));
  if (value.size() > kMaxValueBytes) {
    return Status(Code::kInvalid, "etcd " + op + " " + etcd_internal::Shown(key) + ": value of " +
                                      std::to_string(value.size()) + " bytes, over the limit of " +
                                      std::to_string(kMaxValueBytes));
  }
  return Status::Ok();
}

// One "host:port" of a URL, checked.
Status CheckEndpoint(std::string_view item, std::string_view url) {
  auto bad = [&](const std::string& why) {
    return Status(Code::kInvalid, "etcd URL '" + std::string(url) + "': " + why);
  };
  if (item.empty()) return bad("an empty endpoint");
  size_t colon = std::string_view::npos;
  std::string_view host;
  if (item.front() == '[') {  // [v6 address]:port
    size_t close = item.find(']');
    if (close == std::string_view::npos) return bad("'" + std::string(item) + "' lacks its ']'");
    host = item.substr(1, close - 1);
    if (close + 1 < item.size() && item[close + 1] == ':') colon = close + 1;
  } else {
    colon = item.rfind(':');
    if (colon != std::string_view::npos) host = item.substr(0, colon);
    if (host.find(':') != std::string_view::npos)
      return bad("'" + std::string(item) + "': put an IPv6 address in brackets");
  }
  if (colon == std::string_view::npos) return bad("'" + std::string(item) + "' has no port");
  if (host.empty()) return bad("'" + std::string(item) + "' has no host");
  for (char c : host) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_' &&
        c != ':') {
      return bad("'" + std::string(item) + "': bad character in the host");
    }
  }
  std::string_view port = item.substr(colon + 1);
  bool digits = !port.empty() && port.size() <= 5 &&
                std::all_of(port.begin(), port.end(),
                            [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
  if (!digits || std::stoi(std::string(port)) < 1 || std::stoi(std::string(port)) > 65535)
    return bad("'" + std::string(item) + "': the port must be 1-65535");
  return Status::Ok();
}

}  // namespace

namespace etcd_internal {

std::string Shown(std::string_view key) {
  std::string out;
  for (unsigned char c : key.substr(0, kMaxShownKey)) {
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char hex[5];
      std::snprintf(hex, sizeof(hex), "\\x%02x", c);
      out += hex;
    }
  }
  if (key.size() > kMaxShownKey) out += "...";
  return out;
}

std::string PrefixEnd(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty()) {
    auto last = static_cast<unsigned char>(end.back());
    if (last < 0xff) {
      end.back() = static_cast<char>(last + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');
}

std::string PrefixStart(const std::string& prefix) {
  return prefix.empty() ? std::string(1, '\0') : prefix;
}

Status FromEtcdGrpc(const grpc::Status& s, const std::string& target, const std::string& op,
                    grpc::Channel* channel, std::chrono::milliseconds timeout) {
  if (s.ok()) return Status::Ok();
  std::string m = "etcd " + target + ": " + op + ": " + s.error_message();
  if (s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED && channel != nullptr) {
    grpc_connectivity_state state = channel->GetState(false);
    if (state != GRPC_CHANNEL_READY) {
      return Status(Code::kUnavailable, "etcd " + target + ": " + op + ": unreachable (no " +
                                            "connection within " + std::to_string(timeout.count()) +
                                            " ms; " + StateName(state) + ")");
    }
  }
  switch (s.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
      return Status(Code::kUnavailable, m);
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return Status(Code::kTimeout, m);
    case grpc::StatusCode::NOT_FOUND:
      return Status(Code::kNotFound, m);
    case grpc::StatusCode::ALREADY_EXISTS:
      return Status(Code::kAlreadyExists, m);
    case grpc::StatusCode::OUT_OF_RANGE:  // a compacted or future revision
      return Status(Code::kOutOfRange, m);
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::FAILED_PRECONDITION:
      return Status(Code::kInvalid, m);
    case grpc::StatusCode::RESOURCE_EXHAUSTED:  // a reply over kMaxReplyBytes, a full store
      return Status(Code::kNoMemory, m);
    case grpc::StatusCode::PERMISSION_DENIED:
    case grpc::StatusCode::UNAUTHENTICATED:
      return Status(Code::kPermissionDenied, m);
    case grpc::StatusCode::CANCELLED:
      return Status(Code::kCancelled, m);
    default:
      return Status(Code::kInternal,
                    m + " (gRPC " + std::to_string(static_cast<int>(s.error_code())) + ")");
  }
}

Status CheckKey(const std::string& key, const std::string& op) {
  if (key.empty()) return Status(Code::kInvalid, "etcd " + op + ": empty key");
  if (key.size() > kMaxKeyBytes) {
    return Status(Code::kInvalid, "etcd " + op + " " + Shown(key) + ": key of " +
                                      std::to_string(key.size()) + " bytes, over the limit of " +
                                      std::to_string(kMaxKeyBytes));
  }
  return Status::Ok();
}

Result<EtcdKv> FromStore(const mvccpb::KeyValue& kv, const std::string& where) {
  if (kv.key().size() > kMaxKeyBytes || kv.value().size() > kMaxValueBytes) {
    return Status(Code::kNoMemory,
                  where + ": the store sent " + Shown(kv.key()) + " with a " +
                      std::to_string(kv.key().size()) + "-byte key and a " +
                      std::to_string(kv.value().size()) + "-byte value, over the limits (" +
                      std::to_string(kMaxKeyBytes) + ", " + std::to_string(kMaxValueBytes) + ")");
  }
  return EtcdKv{kv.key(), kv.value(), kv.create_revision(), kv.mod_revision(), kv.lease()};
}

}  // namespace etcd_internal

Result<std::vector<std::string>> ParseEtcdUrl(std::string_view url) {
  if (url.empty()) return Status(Code::kInvalid, "etcd URL is empty");
  auto bad = [&](const std::string& why) {
    return Status(Code::kInvalid, "etcd URL '" + std::string(url) + "': " + why);
  };
  size_t sep = url.find("://");
  if (sep == std::string_view::npos) return bad("expected etcd://HOST:PORT[,HOST:PORT...]");
  std::string_view scheme = url.substr(0, sep);
  if (scheme == "https" || scheme == "etcds")
    return bad("TLS is not supported yet; use etcd:// or http://");
  if (scheme != "etcd" && scheme != "http")
    return bad("unknown scheme '" + std::string(scheme) + "'; expected etcd:// or http://");
  std::string_view rest = url.substr(sep + 3);
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  if (rest.find_first_of("/?#@") != std::string_view::npos)
    return bad("no path, query or user part is allowed");
  std::vector<std::string> endpoints;
  for (;;) {
    size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    MCDMA_RETURN_IF_ERROR(CheckEndpoint(item, url));
    if (endpoints.size() == kMaxEndpoints)
      return bad("more than " + std::to_string(kMaxEndpoints) + " endpoints");
    endpoints.emplace_back(item);
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return endpoints;
}

EtcdClient::EtcdClient(std::vector<std::string> endpoints, Millis rpc_timeout)
    : endpoints_(std::move(endpoints)), rpc_timeout_(rpc_timeout) {
  grpc::ChannelArguments args;
  // Reconnect quickly once a member is back (as the peer channels do:
  // peer/peer_channel.cpp says why the minimum is the larger).
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 5000);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  args.SetMaxReceiveMessageSize(kMaxReplyBytes);
  // A watch is quiet for as long as nothing changes: pings find a member
  // that went away without closing the connection. etcd refuses pings
  // closer than 5 s (--grpc-keepalive-min-time) and, with no call open,
  // any at all.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 0);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  for (const std::string& target : endpoints_) {
    auto ep = std::make_unique<Endpoint>();
    ep->target = target;
    ep->channel = grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
    ep->kv = pb::KV::NewStub(ep->channel);
    ep->lease = pb::Lease::NewStub(ep->channel);
    channels_.push_back(std::move(ep));
  }
}

EtcdClient::~EtcdClient() = default;

void EtcdClient::OnFailure(size_t index, int grpc_code) {
  auto code = static_cast<grpc::StatusCode>(grpc_code);
  if (code != grpc::StatusCode::UNAVAILABLE && code != grpc::StatusCode::DEADLINE_EXCEEDED) return;
  size_t expected = index;
  current_.compare_exchange_strong(expected, (index + 1) % channels_.size());
}

template <typename Call>
Status EtcdClient::Unary(const std::string& op, Call call) {
  if (channels_.empty()) return Status(Code::kInvalid, "etcd " + op + ": no endpoints");
  size_t index = current_.load(std::memory_order_relaxed) % channels_.size();
  const Endpoint& ep = *channels_[index];
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline(rpc_timeout_));
  // A call that waits for the connection is what drives the connection:
  // gRPC's synchronous API reads a connecting socket only while a call or
  // a wait polls it (else its backup poller, every 5 s). A fail-fast call
  // on a channel in backoff never reconnected to a restarted store.
  ctx.set_wait_for_ready(true);
  grpc::Status gs = call(ep, &ctx);
  if (gs.ok()) return Status::Ok();
  OnFailure(index, gs.error_code());
  return etcd_internal::FromEtcdGrpc(gs, ep.target, op, ep.channel.get(), rpc_timeout_);
}

Result<int64_t> EtcdClient::Grant(std::chrono::seconds ttl) {
  if (ttl.count() < 1) return Status(Code::kInvalid, "etcd Grant: a TTL under 1 s");
  pb::LeaseGrantRequest req;
  req.set_ttl(ttl.count());
  pb::LeaseGrantResponse rep;
  MCDMA_RETURN_IF_ERROR(Unary("Grant", [&](const Endpoint& ep, grpc::ClientContext* ctx) {
    return ep.lease->LeaseGrant(ctx, req, &rep);
  }));
  if (!rep.error().empty() || rep.id() == 0) {
    return Status(Code::kInternal, "etcd Grant: the store granted no lease: " + rep.error());
  }
  return rep.id();
}

Result<int64_t> EtcdClient::KeepAliveOnce(int64_t lease) {
  const std::string op = "KeepAlive " + LeaseName(lease);
  pb::LeaseKeepAliveResponse rep;
  bool got = false;
  std::string target;
  MCDMA_RETURN_IF_ERROR(Unary(op, [&](const Endpoint& ep, grpc::ClientContext* ctx) {
    target = ep.target;
    auto stream = ep.lease->LeaseKeepAlive(ctx);
    pb::LeaseKeepAliveRequest req;
    req.set_id(lease);
    if (stream->Write(req)) got = stream->Read(&rep);
    stream->WritesDone();
    return stream->Finish();
  }));
  if (!got) {
    return Status(Code::kUnavailable,
                  "etcd " + target + ": " + op + ": the stream ended without a reply");
  }
  if (rep.ttl() <= 0) return Status(Code::kNotFound, "etcd " + op + ": expired or revoked");
  return rep.ttl();
}

Status EtcdClient::Revoke(int64_t lease) {
  pb::LeaseRevokeRequest req;
  req.set_id(lease);
  pb::LeaseRevokeResponse rep;
  return Unary("Revoke " + LeaseName(lease), [&](const Endpoint& ep, grpc::ClientContext* ctx) {
    return ep.lease->LeaseRevoke(ctx, req, &rep);
  });
}

Status EtcdClient::Put(const std::string& key, const std::string& value, int64_t lease) {
  MCDMA_RETURN_IF_ERROR(CheckPut(key, value, "Put"));
  pb::PutRequest req;
  req.set_key(key);
  req.set_value(value);
  req.set_lease(lease);
  pb::PutResponse rep;
  return Unary(
      "Put " + etcd_internal::Shown(key),
      [&](const Endpoint& ep, grpc::ClientContext* ctx) { return ep.kv->Put(ctx, req, &rep); });
}

Status EtcdClient::Create(const std::string& key, const std::string& value, int64_t lease) {
  MCDMA_RETURN_IF_ERROR(CheckPut(key, value, "Create"));
  pb::TxnRequest req;
  pb::Compare* absent = req.add_compare();
  absent->set_key(key);
  absent->set_target(pb::Compare::CREATE);
  absent->set_result(pb::Compare::EQUAL);
  absent->set_create_revision(0);
  pb::PutRequest* put = req.add_success()->mutable_request_put();
  put->set_key(key);
  put->set_value(value);
  put->set_lease(lease);
  pb::TxnResponse rep;
  MCDMA_RETURN_IF_ERROR(Unary(
      "Create " + etcd_internal::Shown(key),
      [&](const Endpoint& ep, grpc::ClientContext* ctx) { return ep.kv->Txn(ctx, req, &rep); }));
  if (!rep.succeeded())
    return Status(Code::kAlreadyExists,
                  "etcd Create " + etcd_internal::Shown(key) + ": the key exists");
  return Status::Ok();
}

Status EtcdClient::Delete(const std::string& key) {
  MCDMA_RETURN_IF_ERROR(etcd_internal::CheckKey(key, "Delete"));
  pb::DeleteRangeRequest req;
  req.set_key(key);
  pb::DeleteRangeResponse rep;
  return Unary("Delete " + etcd_internal::Shown(key),
               [&](const Endpoint& ep, grpc::ClientContext* ctx) {
                 return ep.kv->DeleteRange(ctx, req, &rep);
               });
}

Result<EtcdListing> EtcdClient::List(const std::string& prefix) {
  const std::string op = "List " + etcd_internal::Shown(prefix);
  if (prefix.size() > kMaxKeyBytes) return etcd_internal::CheckKey(prefix, "List");
  pb::RangeRequest req;
  req.set_key(etcd_internal::PrefixStart(prefix));
  req.set_range_end(etcd_internal::PrefixEnd(prefix));
  req.set_sort_order(pb::RangeRequest::ASCEND);
  req.set_sort_target(pb::RangeRequest::KEY);
  req.set_limit(static_cast<int64_t>(kMaxListKeys) + 1);  // one more tells "too many"
  pb::RangeResponse rep;
  MCDMA_RETURN_IF_ERROR(Unary(op, [&](const Endpoint& ep, grpc::ClientContext* ctx) {
    return ep.kv->Range(ctx, req, &rep);
  }));
  if (rep.more() || static_cast<size_t>(rep.kvs_size()) > kMaxListKeys) {
    return Status(Code::kNoMemory, "etcd " + op + ": " + std::to_string(rep.count()) +
                                       " keys, over the limit of " + std::to_string(kMaxListKeys));
  }
  EtcdListing listing;
  listing.revision = rep.header().revision();
  listing.kvs.reserve(rep.kvs_size());
  for (const mvccpb::KeyValue& kv : rep.kvs()) {
    MCDMA_ASSIGN_OR_RETURN(EtcdKv checked, etcd_internal::FromStore(kv, "etcd " + op));
    listing.kvs.push_back(std::move(checked));
  }
  return listing;
}

Status EtcdClient::Compact(int64_t revision) {
  pb::CompactionRequest req;
  req.set_revision(revision);
  req.set_physical(true);
  pb::CompactionResponse rep;
  return Unary(
      "Compact " + std::to_string(revision),
      [&](const Endpoint& ep, grpc::ClientContext* ctx) { return ep.kv->Compact(ctx, req, &rep); });
}

}  // namespace mcdma::daemon::fabric
