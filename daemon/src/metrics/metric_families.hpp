// The daemon's state as Prometheus metric families (docs/operations.md,
// "Metrics"). Built from the Admin service's own replies, so a scrape and
// `mcdmactl status --json` / `mcdmactl links --json` always agree.
#pragma once

#include <prometheus/metric_family.h>

#include <vector>

#include "mcdma/v1/admin.pb.h"

namespace mcdma::daemon {

std::vector<prometheus::MetricFamily> MetricFamilies(const v1::StatusReply& status,
                                                     const v1::LinksReply& links);

}  // namespace mcdma::daemon
