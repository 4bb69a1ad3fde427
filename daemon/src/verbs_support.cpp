#include "verbs_support.hpp"

#ifdef MCDMA_HAVE_VERBS
#include "driver/verbs/verbs_transport.hpp"
#endif

namespace mcdma::daemon {

VerbsOpened OpenVerbs(const Options& options) {
  VerbsOpened out;
#ifdef MCDMA_HAVE_VERBS
  driver::verbs::VerbsConfig config;
  config.device = options.verbs_device;
  config.port = static_cast<uint8_t>(options.verbs_port);
  config.interface = options.verbs_interface;
  config.gid_index = options.verbs_gid_index;
  config.profile = options.verbs_profile;
  auto dev = driver::verbs::VerbsDevice::Open(config);
  if (!dev.ok()) {
    out.info.reason = dev.status().message();
    return out;
  }
  const driver::verbs::VerbsDeviceStatus& st = (*dev)->status();
  out.info.available = true;
  out.info.device = st.info.name;
  out.info.port = options.verbs_port;
  out.info.gid_index = st.gid.index;
  out.info.gid = st.gid.value;
  out.info.profile = st.caps.profile;
  out.info.detected_profile = st.detected_profile;
  out.info.active_mtu = st.info.ports.empty() ? 0 : st.info.ports.front().active_mtu;
  out.device = std::move(dev).value();
#else
  (void)options;
  out.info.reason = "built without the verbs transport (libibverbs headers were not found)";
#endif
  return out;
}

}  // namespace mcdma::daemon
