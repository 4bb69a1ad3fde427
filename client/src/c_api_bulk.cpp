// The C ABI: buffers, exports, resolved remotes and one-sided transfers
// (synchronous, asynchronous and batched).
#include <new>
#include <string>
#include <vector>

#include "c_api_internal.hpp"

namespace {
using mcdma::capi::Bad;
using mcdma::capi::Check;
using mcdma::capi::Fail;
using mcdma::capi::Guard;
using mcdma::capi::Ms;

// A transfer's handles must be the client's own: a buffer id or remote
// handle means nothing in another session.
mcdma_code CheckOwned(const char* fn, const mcdma_client* client, const mcdma_remote* remote,
                      const mcdma_buffer* local) {
  if (remote->owner != client)
    return Bad(std::string(fn) + ": the remote was resolved by another client");
  if (local->owner != client)
    return Bad(std::string(fn) + ": the local buffer belongs to another client");
  return MCDMA_OK;
}

enum class Direction { kWrite, kRead };

mcdma_code Transfer(const char* fn, Direction dir, mcdma_client* client, const mcdma_remote* remote,
                    uint64_t remote_offset, const mcdma_buffer* local, uint64_t local_offset,
                    uint64_t length, uint32_t timeout_ms, uint64_t* moved) {
  if (client == nullptr || remote == nullptr || local == nullptr)
    return Bad(std::string(fn) + ": NULL argument");
  if (mcdma_code c = CheckOwned(fn, client, remote, local); c != MCDMA_OK) return c;
  return Guard([&] {
    mcdma::Client& cl = *client->client;
    auto r = dir == Direction::kWrite ? cl.Write(remote->remote, remote_offset, local->buffer,
                                                 local_offset, length, Ms(timeout_ms))
                                      : cl.Read(remote->remote, remote_offset, local->buffer,
                                                local_offset, length, Ms(timeout_ms));
    if (!r.ok()) return Fail(r.status());
    if (moved != nullptr) *moved = *r;
    return MCDMA_OK;
  });
}

mcdma_code TransferAsync(const char* fn, Direction dir, mcdma_client* client,
                         const mcdma_remote* remote, uint64_t remote_offset,
                         const mcdma_buffer* local, uint64_t local_offset, uint64_t length,
                         const mcdma_op_options* options, mcdma_transfer_done done, void* user) {
  if (client == nullptr || remote == nullptr || local == nullptr || done == nullptr)
    return Bad(std::string(fn) + ": NULL argument");
  if (mcdma_code c = CheckOwned(fn, client, remote, local); c != MCDMA_OK) return c;
  return Guard([&] {
    mcdma_op_options o;
    if (mcdma_code c = mcdma::capi::ReadOpOptions(fn, options, &o); c != MCDMA_OK) return c;
    mcdma::Client& cl = *client->client;
    auto f = dir == Direction::kWrite ? cl.WriteAsync(remote->remote, remote_offset, local->buffer,
                                                      local_offset, length, Ms(o.timeout_ms))
                                      : cl.ReadAsync(remote->remote, remote_offset, local->buffer,
                                                     local_offset, length, Ms(o.timeout_ms));
    f.Then([done, user](mcdma::Result<uint64_t> r) {
      if (r.ok()) {
        done(user, MCDMA_OK, *r);
      } else {
        done(user, Fail(r.status()), 0);
      }
    });
    return MCDMA_OK;
  });
}

mcdma_code Batch(const char* fn, Direction dir, mcdma_client* client, const mcdma_transfer* pieces,
                 size_t count, const mcdma_op_options* options, uint64_t* moved) {
  if (client == nullptr || (pieces == nullptr && count != 0))
    return Bad(std::string(fn) + ": NULL argument");
  return Guard([&] {
    mcdma_op_options o;
    if (mcdma_code c = mcdma::capi::ReadOpOptions(fn, options, &o); c != MCDMA_OK) return c;
    std::vector<mcdma::Transfer> list;
    list.reserve(count);
    for (size_t i = 0; i < count; ++i) {
      const mcdma_transfer& p = pieces[i];
      const std::string piece = std::string(fn) + ": piece " + std::to_string(i);
      if (p.remote == nullptr || p.local == nullptr) return Bad(piece + " has a NULL handle");
      if (mcdma_code c = CheckOwned(piece.c_str(), client, p.remote, p.local); c != MCDMA_OK)
        return c;
      list.push_back(mcdma::Transfer{&p.local->buffer, p.local_offset, &p.remote->remote,
                                     p.remote_offset, p.length});
    }
    mcdma::Client& cl = *client->client;
    auto r = dir == Direction::kWrite ? cl.WriteBatch(list, Ms(o.timeout_ms))
                                      : cl.ReadBatch(list, Ms(o.timeout_ms));
    if (!r.ok()) return Fail(r.status());
    if (moved != nullptr) *moved = *r;
    return MCDMA_OK;
  });
}
}  // namespace

extern "C" {

mcdma_code mcdma_alloc(mcdma_client* client, uint64_t size, mcdma_buffer** out) {
  if (client == nullptr || out == nullptr) return Bad("mcdma_alloc: NULL argument");
  return Guard([&] {
    auto r = client->client->Alloc(size);
    if (!r.ok()) return Fail(r.status());
    *out = new mcdma_buffer{std::move(r).value(), client};
    return MCDMA_OK;
  });
}

void* mcdma_buffer_data(const mcdma_buffer* buffer) {
  return buffer ? buffer->buffer.data() : nullptr;
}
uint64_t mcdma_buffer_size(const mcdma_buffer* buffer) {
  return buffer ? buffer->buffer.size() : 0;
}
void mcdma_buffer_free(mcdma_buffer* buffer) { delete buffer; }

mcdma_code mcdma_export(mcdma_client* client, const mcdma_buffer* buffer, const char* name,
                        uint64_t offset, uint64_t length, uint64_t ttl_ms, uint32_t flags) {
  if (client == nullptr || buffer == nullptr || name == nullptr)
    return Bad("mcdma_export: NULL argument");
  if ((flags & ~(MCDMA_EXPORT_READ | MCDMA_EXPORT_WRITE)) != 0)
    return Bad("mcdma_export: unknown flags");
  return Guard([&] {
    mcdma::ExportOptions o;
    o.offset = offset;
    o.length = length;
    o.ttl = std::chrono::milliseconds(ttl_ms);
    o.allow_read = (flags & MCDMA_EXPORT_READ) != 0;
    o.allow_write = (flags & MCDMA_EXPORT_WRITE) != 0;
    return Check(client->client->Export(buffer->buffer, name, o));
  });
}

mcdma_code mcdma_export_ex(mcdma_client* client, const mcdma_buffer* buffer, const char* name,
                           const mcdma_export_options* options) {
  if (client == nullptr || buffer == nullptr || name == nullptr)
    return Bad("mcdma_export_ex: NULL argument");
  return Guard([&] {
    mcdma_export_options in;
    mcdma_code c = mcdma::capi::ReadExportOptions("mcdma_export_ex", options, &in);
    if (c != MCDMA_OK) return c;
    mcdma::ExportOptions o;
    o.offset = in.offset;
    o.length = in.length;
    o.ttl = std::chrono::milliseconds(in.ttl_ms);
    o.allow_read = (in.flags & MCDMA_EXPORT_READ) != 0;
    o.allow_write = (in.flags & MCDMA_EXPORT_WRITE) != 0;
    o.allowed_peers.assign(in.allowed_peers, in.allowed_peers + in.allowed_peer_count);
    return Check(client->client->Export(buffer->buffer, name, o));
  });
}

mcdma_code mcdma_unexport(mcdma_client* client, const char* name) {
  if (client == nullptr || name == nullptr) return Bad("mcdma_unexport: NULL argument");
  return Guard([&] { return Check(client->client->Unexport(name)); });
}

mcdma_code mcdma_resolve(mcdma_client* client, const char* peer, const char* name,
                         mcdma_remote** out) {
  if (client == nullptr || name == nullptr || out == nullptr)
    return Bad("mcdma_resolve: NULL argument");
  return Guard([&] {
    auto r = client->client->Resolve(name, peer ? peer : "");
    if (!r.ok()) return Fail(r.status());
    *out = new mcdma_remote{std::move(r).value(), client};
    return MCDMA_OK;
  });
}

uint64_t mcdma_remote_length(const mcdma_remote* remote) {
  return remote ? remote->remote.length : 0;
}

uint32_t mcdma_remote_flags(const mcdma_remote* remote) {
  if (remote == nullptr) return 0;
  return (remote->remote.readable ? MCDMA_EXPORT_READ : 0u) |
         (remote->remote.writable ? MCDMA_EXPORT_WRITE : 0u);
}

void mcdma_remote_free(mcdma_remote* remote) {
  if (remote == nullptr) return;
  (void)remote->owner->client->Release(remote->remote);
  delete remote;
}

mcdma_code mcdma_write(mcdma_client* client, const mcdma_remote* remote, uint64_t remote_offset,
                       const mcdma_buffer* local, uint64_t local_offset, uint64_t length,
                       uint32_t timeout_ms, uint64_t* moved) {
  return Transfer("mcdma_write", Direction::kWrite, client, remote, remote_offset, local,
                  local_offset, length, timeout_ms, moved);
}

mcdma_code mcdma_read(mcdma_client* client, const mcdma_remote* remote, uint64_t remote_offset,
                      const mcdma_buffer* local, uint64_t local_offset, uint64_t length,
                      uint32_t timeout_ms, uint64_t* moved) {
  return Transfer("mcdma_read", Direction::kRead, client, remote, remote_offset, local,
                  local_offset, length, timeout_ms, moved);
}

mcdma_code mcdma_write_async(mcdma_client* client, const mcdma_remote* remote,
                             uint64_t remote_offset, const mcdma_buffer* local,
                             uint64_t local_offset, uint64_t length,
                             const mcdma_op_options* options, mcdma_transfer_done done,
                             void* user) {
  return TransferAsync("mcdma_write_async", Direction::kWrite, client, remote, remote_offset, local,
                       local_offset, length, options, done, user);
}

mcdma_code mcdma_read_async(mcdma_client* client, const mcdma_remote* remote,
                            uint64_t remote_offset, const mcdma_buffer* local,
                            uint64_t local_offset, uint64_t length, const mcdma_op_options* options,
                            mcdma_transfer_done done, void* user) {
  return TransferAsync("mcdma_read_async", Direction::kRead, client, remote, remote_offset, local,
                       local_offset, length, options, done, user);
}

mcdma_code mcdma_write_batch(mcdma_client* client, const mcdma_transfer* pieces, size_t count,
                             const mcdma_op_options* options, uint64_t* moved) {
  return Batch("mcdma_write_batch", Direction::kWrite, client, pieces, count, options, moved);
}

mcdma_code mcdma_read_batch(mcdma_client* client, const mcdma_transfer* pieces, size_t count,
                            const mcdma_op_options* options, uint64_t* moved) {
  return Batch("mcdma_read_batch", Direction::kRead, client, pieces, count, options, moved);
}

}  // extern "C"
