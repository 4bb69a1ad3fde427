// Role "peer-rogue" of mcdma_testapp: a peer that holds the fabric key (so
// it authenticates) but lies about rails. As --host-id (the real dialer of
// a link to --address), it asks the daemon there to add rails the canonical
// plan does not have: an index beyond the plan, a pair under another
// pair's index (rails reordered), a rail the dialer never announced, and a
// generation that is not the link's. Prints one JSON line with the code
// and message of each answer; the test checks every one is refused by
// name and that the real link and its rails carry on.
//   peer-rogue --address HOST:PORT --key FILE --host-id ID --expect ID
//              --generation G --pair1 DIALER_RAIL,CALLEE_RAIL
//              --pair4 DIALER_RAIL,CALLEE_RAIL
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "mcdma_auth/fabric_key.hpp"
#include "peer/peer_channel.hpp"
#include "testapp.hpp"

namespace mcdma::itest {
namespace {

std::string JsonText(const std::string& s) {
  std::string out;
  for (char c : s) out += (c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20) ? ' ' : c;
  return out;
}

}  // namespace

int RunPeerRogue(const Args& args) {
  auto key = LoadFabricKey(args.Need("key"));
  if (!key.ok()) {
    Say("{\"ok\":0,\"error\":\"%s\"}", JsonText(key.status().message()).c_str());
    return 1;
  }
  auto shared = std::make_shared<const FabricKey>(std::move(key).value());
  daemon::PeerChannel ch(args.Need("address"), args.Need("expect"), args.Need("host-id"), shared,
                         grpc::InsecureChannelCredentials());
  const auto timeout = std::chrono::milliseconds(10000);
  if (Status st = ch.Authenticate(timeout); !st.ok()) {
    Say("{\"ok\":0,\"error\":\"%s\"}", JsonText(st.ToString()).c_str());
    return 1;
  }
  const uint64_t generation = std::stoull(args.Need("generation"));
  const std::vector<std::string> pair1 = SplitList(args.Need("pair1"));
  const std::vector<std::string> pair4 = SplitList(args.Need("pair4"));
  if (pair1.size() != 2 || pair4.size() != 2) {
    Say("{\"ok\":0,\"error\":\"--pair1 and --pair4 take DIALER_RAIL,CALLEE_RAIL\"}");
    return 1;
  }
  std::string out;
  auto ask = [&](const char* what, uint64_t gen, uint32_t index, const std::string& caller,
                 const std::string& callee) {
    v1::PeerAddRailRequest req;
    req.set_generation(gen);
    req.set_index(index);
    req.set_caller_rail(caller);
    req.set_callee_rail(callee);
    req.set_endpoint_info("not an endpoint");
    req.set_slot_bytes(64 << 10);
    auto rep = ch.AddRail(req, timeout);
    std::string code = rep.ok() ? "OK" : std::string(CodeName(rep.status().code()));
    std::string message = rep.ok() ? "" : rep.status().message();
    std::fprintf(stderr, "peer-rogue: %s: %s %s\n", what, code.c_str(), message.c_str());
    out += std::string(",\"") + what + "\":\"" + code + "\",\"" + what + "_message\":\"" +
           JsonText(message) + "\"";
  };
  ask("beyond", generation, 99, pair1[0], pair1[1]);
  ask("reordered", generation, 1, pair4[0], pair4[1]);
  ask("unannounced", generation, 1, "tcp:10.9.9.9", pair1[1]);
  ask("generation", generation + 1, 1, pair1[0], pair1[1]);
  Say("{\"ok\":1%s}", out.c_str());
  return 0;
}

}  // namespace mcdma::itest
