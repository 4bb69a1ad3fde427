#include "engine/registry.hpp"

namespace mcdma::daemon {

void Registry::AddBuffer(std::shared_ptr<BufferRecord> buffer) {
  uint64_t id = buffer->id;
  buffers_.emplace(id, std::move(buffer));
}

std::shared_ptr<BufferRecord> Registry::OwnedBuffer(uint64_t id, uint64_t session) const {
  auto it = buffers_.find(id);
  if (it == buffers_.end() || it->second->owner != session) return nullptr;
  return it->second;
}

std::shared_ptr<BufferRecord> Registry::RemoveBuffer(uint64_t id) {
  auto node = buffers_.extract(id);
  return node.empty() ? nullptr : std::move(node.mapped());
}

void Registry::AddExport(std::shared_ptr<ExportRecord> e) {
  std::string name = e->name;
  exports_.emplace(std::move(name), std::move(e));
}

std::shared_ptr<ExportRecord> Registry::FindExport(const std::string& name) const {
  auto it = exports_.find(name);
  return it == exports_.end() ? nullptr : it->second;
}

std::shared_ptr<ExportRecord> Registry::FindExportById(uint64_t id) const {
  // Exports are few (bounded per session and user); a scan is enough.
  for (const auto& [name, e] : exports_) {
    if (e->id == id) return e;
  }
  return nullptr;
}

std::shared_ptr<ExportRecord> Registry::TakeExport(const std::string& name) {
  auto node = exports_.extract(name);
  return node.empty() ? nullptr : std::move(node.mapped());
}

std::vector<std::string> Registry::ExpiredExports(Clock::time_point now) const {
  std::vector<std::string> out;
  for (const auto& [name, e] : exports_) {
    if (e->expires && *e->expires <= now) out.push_back(name);
  }
  return out;
}

void Registry::AddService(ServiceRecord service) {
  names_.emplace(service.name, service.id);
  uint64_t id = service.id;
  services_.emplace(id, std::move(service));
}

const ServiceRecord* Registry::FindService(uint64_t id) const {
  auto it = services_.find(id);
  return it == services_.end() ? nullptr : &it->second;
}

std::optional<uint64_t> Registry::ServiceNamed(const std::string& name) const {
  auto it = names_.find(name);
  if (it == names_.end()) return std::nullopt;
  return it->second;
}

void Registry::RemoveService(uint64_t id) {
  auto it = services_.find(id);
  if (it == services_.end()) return;
  names_.erase(it->second.name);
  services_.erase(it);
}

const Registry::Unmapped* Registry::FindUnmapped(const std::string& segment) const {
  auto it = unmapped_.find(segment);
  return it == unmapped_.end() ? nullptr : &it->second;
}

std::vector<std::string> Registry::StaleSegments(Clock::time_point now,
                                                 Clock::duration timeout) const {
  std::vector<std::string> out;
  for (const auto& [name, u] : unmapped_) {
    if (now - u.created >= timeout) out.push_back(name);
  }
  return out;
}

void Registry::AddDrain(uint64_t export_id, DrainingRegistration drain) {
  drains_[export_id] = std::move(drain);
}

void Registry::AckDrain(uint64_t export_id, uint64_t link) {
  auto d = drains_.find(export_id);
  if (d == drains_.end()) return;
  d->second.waiting.erase(link);
  if (d->second.waiting.empty()) drains_.erase(d);  // deregisters
}

void Registry::LinkGone(uint64_t link) {
  // Its queue pair is gone: no late access can come from it.
  for (auto d = drains_.begin(); d != drains_.end();) {
    d->second.waiting.erase(link);
    d = d->second.waiting.empty() ? drains_.erase(d) : std::next(d);
  }
}

std::vector<std::pair<uint64_t, size_t>> Registry::ExpireDrains(Clock::time_point now) {
  std::vector<std::pair<uint64_t, size_t>> out;
  for (auto d = drains_.begin(); d != drains_.end();) {
    if (d->second.deadline > now) {
      ++d;
      continue;
    }
    out.emplace_back(d->first, d->second.waiting.size());
    d = drains_.erase(d);
  }
  return out;
}

void Registry::Clear() {
  buffers_.clear();
  exports_.clear();
}

}  // namespace mcdma::daemon
