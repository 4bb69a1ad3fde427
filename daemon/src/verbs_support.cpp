#include "verbs_support.hpp"

#ifdef MCDMA_HAVE_VERBS
#include "driver/verbs/verbs_transport.hpp"
#endif

namespace mcdma::daemon {

#ifdef MCDMA_HAVE_VERBS
namespace {

Result<Engine::RdmaPort> OpenOne(const RdmaConfig& c) {
  driver::verbs::VerbsConfig config;
  config.device = c.device;
  config.port = static_cast<uint8_t>(c.port);
  config.interface = c.interface;
  config.gid_index = c.gid_index;
  config.profile = c.profile;
  MCDMA_ASSIGN_OR_RETURN(auto dev, driver::verbs::VerbsDevice::Open(config));
  const driver::verbs::VerbsDeviceStatus& st = dev->status();
  Engine::RdmaPort port;
  LocalVerbsInfo& info = port.info;
  info.available = true;
  info.device = st.info.name;
  info.port = c.port;
  info.rail = "verbs:" + st.info.name + ":" + std::to_string(c.port);
  info.gid_index = st.gid.index;
  info.gid = st.gid.value;
  info.profile = st.caps.profile;
  info.detected_profile = st.detected_profile;
  info.active_mtu = st.info.ports.empty() ? 0 : st.info.ports.front().active_mtu;
  port.device = std::move(dev);
  return port;
}

// What to open: [[rdma]], else verbs.device, else every ACTIVE port.
Result<std::vector<RdmaConfig>> Wanted(const Options& options) {
  if (!options.rdma.empty()) return options.rdma;
  RdmaConfig one;
  one.port = options.verbs_port;
  one.interface = options.verbs_interface;
  one.gid_index = options.verbs_gid_index;
  one.profile = options.verbs_profile;
  if (!options.verbs_device.empty()) {
    one.device = options.verbs_device;
    return std::vector<RdmaConfig>{one};
  }
  MCDMA_ASSIGN_OR_RETURN(std::vector<driver::verbs::PortRef> active,
                         driver::verbs::ListActivePorts());
  if (active.empty())
    return Status(Code::kNotFound, "no RDMA device has an ACTIVE port (ibv_devinfo shows them)");
  std::vector<RdmaConfig> out;
  for (const driver::verbs::PortRef& p : active) {
    if (out.size() == kMaxRdmaPorts) break;
    RdmaConfig c = one;
    c.device = p.device;
    c.port = p.port;
    // The interface rule names one interface: it holds for the port it
    // belongs to, not for every device's.
    c.interface.clear();
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace
#endif

VerbsOpened OpenVerbs(const Options& options) {
  VerbsOpened out;
#ifdef MCDMA_HAVE_VERBS
  auto wanted = Wanted(options);
  if (!wanted.ok()) {
    out.reason = wanted.status().message();
    return out;
  }
  for (const RdmaConfig& c : *wanted) {
    auto port = OpenOne(c);
    if (!port.ok()) {
      // One device that cannot be opened does not take the others down.
      out.reason += (out.reason.empty() ? "" : "; ") + c.device + " port " +
                    std::to_string(c.port) + ": " + port.status().message();
      continue;
    }
    out.ports.push_back(std::move(port).value());
  }
#else
  (void)options;
  out.reason = "built without the verbs transport (libibverbs headers were not found)";
#endif
  return out;
}

RdmaPortState StateOfRdmaPort(const driver::Device* device) {
  RdmaPortState st;
#ifdef MCDMA_HAVE_VERBS
  const auto* v = dynamic_cast<const driver::verbs::VerbsDevice*>(device);
  if (v == nullptr) return st;
  st.active = v->port_active();
  st.failure = v->port_failure();
  st.queue_pairs = v->queue_pairs();
  st.registrations = v->registrations();
#else
  (void)device;
#endif
  return st;
}

}  // namespace mcdma::daemon
