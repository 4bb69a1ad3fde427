#include "metrics/metrics_endpoint.hpp"

#include <prometheus/collectable.h>
#include <prometheus/exposer.h>

#include <exception>

#include "metrics/metric_families.hpp"
#include "service/admin_service.hpp"

namespace mcdma::daemon {

class MetricsCollector final : public prometheus::Collectable {
 public:
  explicit MetricsCollector(AdminService& admin) : admin_(admin) {}
  std::vector<prometheus::MetricFamily> Collect() const override {
    v1::StatusRequest status_req;
    v1::StatusReply status;
    // UNAVAILABLE once the engine stops: the scrape gets no series, and
    // Prometheus's own `up` says the target is gone soon after.
    if (!admin_.Status(nullptr, &status_req, &status).ok()) return {};
    v1::LinksRequest links_req;
    v1::LinksReply links;
    if (!admin_.Links(nullptr, &links_req, &links).ok()) links.Clear();
    v1::FabricRequest fabric_req;
    v1::FabricReply fabric;
    // Cleared on failure: no fabric series rather than stale ones.
    if (!admin_.Fabric(nullptr, &fabric_req, &fabric).ok()) fabric.Clear();
    return MetricFamilies(status, links, fabric);
  }

 private:
  AdminService& admin_;
};

Result<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(const std::string& address,
                                                                AdminService& admin) {
  size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon + 1 == address.size() ||
      address.find_first_not_of("0123456789", colon + 1) != std::string::npos) {
    return Status(Code::kInvalid,
                  "metrics_listen '" + address + "': expected host:port (e.g. 127.0.0.1:9464)");
  }
  std::unique_ptr<MetricsEndpoint> m(new MetricsEndpoint());
  m->collector_ = std::make_shared<MetricsCollector>(admin);
  try {
    m->exposer_ = std::make_unique<prometheus::Exposer>(address, /*num_threads=*/2);
    m->exposer_->RegisterCollectable(m->collector_, "/metrics");
  } catch (const std::exception& e) {
    return Status(Code::kSystem,
                  "metrics_listen '" + address + "': cannot listen (" + e.what() + ")");
  }
  std::vector<int> ports = m->exposer_->GetListeningPorts();
  m->address_ = address.substr(0, colon + 1) +
                (ports.empty() ? address.substr(colon + 1) : std::to_string(ports.front()));
  return m;
}

MetricsEndpoint::~MetricsEndpoint() {
  // The server's threads stop before the collector they call goes.
  exposer_.reset();
}

}  // namespace mcdma::daemon
