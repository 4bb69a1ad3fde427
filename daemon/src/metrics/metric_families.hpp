// The daemon's state as Prometheus metric families (docs/operations.md,
// "Metrics"). Built from the Admin service's own replies, so a scrape and
// `mcdmactl status --json` / `mcdmactl links --json` / `mcdmactl fabric
// --json` always agree.
#pragma once

#include <prometheus/metric_family.h>

#include <vector>

#include "mcdma/v1/admin.pb.h"

namespace mcdma::daemon {

// `fabric`: the mcdma_fabric_* families, none when its source is "" (no
// fabric configured).
std::vector<prometheus::MetricFamily> MetricFamilies(const v1::StatusReply& status,
                                                     const v1::LinksReply& links,
                                                     const v1::FabricReply& fabric);

}  // namespace mcdma::daemon
