// The opt-in Prometheus endpoint (`metrics_listen`): GET /metrics serves the
// text exposition format over HTTP, from prometheus-cpp's Exposer (its
// embedded civetweb server, two threads). Each scrape asks the Admin
// service for Status, Links and Fabric, as `mcdmactl status`, `links` and
// `fabric` do, and converts the replies (metric_families.hpp).
#pragma once

#include <memory>
#include <string>

#include "mcdma/status.hpp"

namespace prometheus {
class Exposer;
}

namespace mcdma::daemon {

class AdminService;
class MetricsCollector;

class MetricsEndpoint {
 public:
  // Listens on `address` ("host:port", "[v6]:port"; port 0: any free one).
  // INVALID for an address without a port, SYSTEM naming the address when
  // it cannot listen.
  static Result<std::unique_ptr<MetricsEndpoint>> Start(const std::string& address,
                                                        AdminService& admin);
  ~MetricsEndpoint();
  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;

  // "host:port" as bound (the port resolved when 0 was asked for).
  const std::string& address() const { return address_; }

 private:
  MetricsEndpoint() = default;
  std::shared_ptr<MetricsCollector> collector_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::string address_;
};

}  // namespace mcdma::daemon
