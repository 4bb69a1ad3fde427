// What etcd_client.cpp (unary calls) and etcd_watch.cpp (watches) share:
// an endpoint's channel and stubs, and the helpers that name keys in
// messages, make a prefix's key range, convert gRPC's answers and check
// what the store sent against the bounds. Included by those two files
// only; the helpers live in etcd_client.cpp, once (the daemon is a unity
// build: a second file-local copy would collide).
//
// Threads: an Endpoint is fixed after EtcdClient's constructor and read
// from any thread; the helpers are plain functions.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "etcd/rpc.grpc.pb.h"
#include "fabric/etcd_client.hpp"

namespace mcdma::daemon::fabric {
namespace pb = etcdserverpb;

// One endpoint's channel and stubs; fixed after the constructor.
struct EtcdClient::Endpoint {
  std::string target;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<pb::KV::Stub> kv;
  std::unique_ptr<pb::Lease::Stub> lease;
};

namespace etcd_internal {

// A key as a person reads it in a message: printable ASCII kept, other
// bytes as \xNN, long keys cut.
std::string Shown(std::string_view key);

// The end of the range holding every key that starts with `prefix`: the
// prefix with its last byte below 0xff incremented and what follows it
// dropped; "\0" (every key from `prefix` on) when there is none.
std::string PrefixEnd(const std::string& prefix);

// The key that starts a prefix range: an empty prefix is every key ("\0").
std::string PrefixStart(const std::string& prefix);

// A gRPC status as a Status naming the endpoint and the operation.
// `channel`: where a call that ran out of time waited for a connection
// (wait_for_ready); not connected then, the store was unreachable rather
// than slow.
Status FromEtcdGrpc(const grpc::Status& s, const std::string& target, const std::string& op,
                    grpc::Channel* channel = nullptr,
                    std::chrono::milliseconds timeout = std::chrono::milliseconds(0));

// INVALID for an empty key or one over kMaxKeyBytes.
Status CheckKey(const std::string& key, const std::string& op);

// A pair the store sent, checked against the bounds: NO_MEMORY over them.
Result<EtcdKv> FromStore(const mvccpb::KeyValue& kv, const std::string& where);

}  // namespace etcd_internal
}  // namespace mcdma::daemon::fabric
