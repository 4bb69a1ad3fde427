// What sessions registered with the engine: buffers, exports, services and
// their names, the segments not yet mapped by their app, and the verbs
// registrations of revoked exports still draining.
//
// Owner: the Engine, which holds one Registry; engine thread only. The
// registry keeps the records and their indexes consistent; deciding who may
// do what (sessions, limits, links) is the engine's (engine_control.cpp).
// Invariants: a service's name maps to its id and back; an export is listed
// under its name until removed; a draining registration waits only on links
// that are up and goes at the latest at its deadline.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/resources.hpp"

namespace mcdma::daemon {

class Registry {
 public:
  // ---- Buffers ----
  void AddBuffer(std::shared_ptr<BufferRecord> buffer);
  // The buffer `id` if `session` owns it, else null.
  std::shared_ptr<BufferRecord> OwnedBuffer(uint64_t id, uint64_t session) const;
  std::shared_ptr<BufferRecord> RemoveBuffer(uint64_t id);
  const std::unordered_map<uint64_t, std::shared_ptr<BufferRecord>>& buffers() const {
    return buffers_;
  }

  // ---- Exports, by name ----
  void AddExport(std::shared_ptr<ExportRecord> e);
  std::shared_ptr<ExportRecord> FindExport(const std::string& name) const;
  // By its id (what peers name it by); null when it is gone.
  std::shared_ptr<ExportRecord> FindExportById(uint64_t id) const;
  std::shared_ptr<ExportRecord> TakeExport(const std::string& name);
  // Names of the exports whose TTL ended at or before `now`.
  std::vector<std::string> ExpiredExports(Clock::time_point now) const;
  const std::map<std::string, std::shared_ptr<ExportRecord>>& exports() const { return exports_; }

  // ---- Services, by id and by name (unique on this host) ----
  bool ServiceNameTaken(const std::string& name) const { return names_.count(name) != 0; }
  void AddService(ServiceRecord service);
  const ServiceRecord* FindService(uint64_t id) const;
  std::optional<uint64_t> ServiceNamed(const std::string& name) const;
  void RemoveService(uint64_t id);
  size_t services() const { return services_.size(); }

  // ---- Segments not yet mapped by their app (unlinked when mapped or
  // after the attach timeout) ----
  struct Unmapped {
    uint64_t session = 0;
    uint64_t buffer_id = 0;  // 0: the session's mailbox
    Clock::time_point created;
  };
  void TrackUnmapped(const std::string& segment, Unmapped u) { unmapped_[segment] = u; }
  const Unmapped* FindUnmapped(const std::string& segment) const;
  void ForgetUnmapped(const std::string& segment) { unmapped_.erase(segment); }
  // Segments created `timeout` or longer before `now`.
  std::vector<std::string> StaleSegments(Clock::time_point now, Clock::duration timeout) const;

  // ---- Revocations: verbs registrations of removed exports, kept (with
  // their memory) until every verbs peer that resolved the export
  // acknowledged the kRevoke: an RDMA access posted before the peer learned
  // of it must not meet a deregistered region (the NIC would refuse it and
  // fail the link). ----
  struct DrainingRegistration {
    std::vector<Registration> registrations;  // one per RDMA port
    std::shared_ptr<BufferRecord> buffer;
    std::set<uint64_t> waiting;  // link ids
    Clock::time_point deadline;
  };
  void AddDrain(uint64_t export_id, DrainingRegistration drain);
  // `link` acknowledged the revocation of `export_id` (or went down: then
  // for every export). The registration goes with the last one.
  void AckDrain(uint64_t export_id, uint64_t link);
  void LinkGone(uint64_t link);
  // Drops the drains past their deadline; returns (export id, peers that
  // never answered) for each.
  std::vector<std::pair<uint64_t, size_t>> ExpireDrains(Clock::time_point now);
  size_t draining() const { return drains_.size(); }

  // Everything, at shutdown.
  void Clear();

 private:
  std::unordered_map<uint64_t, std::shared_ptr<BufferRecord>> buffers_;
  std::map<std::string, std::shared_ptr<ExportRecord>> exports_;
  std::unordered_map<uint64_t, ServiceRecord> services_;
  std::unordered_map<std::string, uint64_t> names_;
  std::map<std::string, Unmapped> unmapped_;
  std::map<uint64_t, DrainingRegistration> drains_;  // by export id
};

}  // namespace mcdma::daemon
