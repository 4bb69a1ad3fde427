#include "doctor/devices.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "doctor/host.hpp"

#ifdef MCDMA_HAVE_VERBS
#include "driver/verbs/verbs_objects.hpp"
#endif

namespace mcdma::tools::doctor {

DevicesInput ListHostDevices(uint8_t port) {
  DevicesInput in;
  in.source = "libibverbs";
#ifdef MCDMA_HAVE_VERBS
  auto names = driver::verbs::ListDevices();
  if (!names.ok()) {
    // ENOSYS here means the kernel has no RDMA support loaded at all. A Mac
    // has no sysfs: there the macOS checks say which provider is missing.
    std::error_code ec;
    const bool sysfs = kHostIsMacOS || std::filesystem::exists("/sys/class/infiniband", ec);
    in.status =
        Status(names.status().code(),
               names.status().message() + (sysfs ? "" : "; /sys/class/infiniband does not exist"));
    return in;
  }
  for (const auto& name : *names) {
    auto described = [&]() -> mcdma::Result<driver::verbs::DeviceInfo> {
      MCDMA_ASSIGN_OR_RETURN(auto context, driver::verbs::Context::Open(name));
      return context.Describe(port);
    }();
    if (described.ok()) {
      in.devices.push_back(std::move(described).value());
    } else {
      driver::verbs::DeviceInfo bare;
      bare.name = name;
      in.devices.push_back(std::move(bare));
      in.describe_errors.emplace(name, described.status());
    }
  }
#else
  (void)port;
  in.status = Status(Code::kUnavailable, std::string("this mcdmactl was built without libibverbs") +
                                             (kHostIsMacOS ? "" : " (rdma-core's libibverbs-dev)") +
                                             ", so it cannot list devices");
#endif
  return in;
}

DevicesInput ReadDeviceDump(const std::string& path) {
  DevicesInput in;
  in.source = "device dump " + path;
  std::ifstream file(path);
  if (!file) {
    in.status = Status(Code::kNotFound, "cannot open " + path);
    return in;
  }
  std::ostringstream text;
  text << file.rdbuf();
  auto parsed = driver::verbs::ParseDeviceDump(text.str());
  if (!parsed.ok()) {
    in.status = Status(parsed.status().code(), path + ": " + parsed.status().message());
    return in;
  }
  in.devices = std::move(parsed).value();
  return in;
}

}  // namespace mcdma::tools::doctor
