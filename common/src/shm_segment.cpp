#include "mcdma_internal/shm_segment.hpp"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <boost/interprocess/mapped_region.hpp>
#include <boost/interprocess/shared_memory_object.hpp>
#include <cerrno>

#include "mcdma_internal/sys.hpp"
#include "platform/names.hpp"
#include "platform/shm.hpp"

namespace bip = boost::interprocess;

namespace mcdma {

// Only the mapping is kept: the object (and its file descriptor) is closed
// once mapped, so a process holds no fd per segment.
struct ShmSegment::Impl {
  bip::mapped_region region;
};

uint64_t PageSize() {
  static const uint64_t kPage = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  return kPage;
}

std::string ShmSegment::NewName(char kind) {
  return std::string("/mcdma-") + kind + "-" + RandomHex(11);
}

std::string ShmSegment::NewName(char kind, const std::string& tag) {
  std::string hex = RandomHex(11);
  hex.replace(0, std::min<size_t>(tag.size(), 8), tag, 0, 8);
  return std::string("/mcdma-") + kind + "-" + hex;
}

ShmSegment::ShmSegment(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {
  data_ = static_cast<std::byte*>(impl_->region.get_address());
  size_ = impl_->region.get_size();
}

ShmSegment::ShmSegment() = default;

ShmSegment::ShmSegment(ShmSegment&& o) noexcept
    : impl_(std::move(o.impl_)),
      data_(o.data_),
      size_(o.size_),
      name_(std::move(o.name_)),
      linked_(o.linked_) {
  o.data_ = nullptr;
  o.size_ = 0;
  o.linked_ = false;
}

ShmSegment& ShmSegment::operator=(ShmSegment&& o) noexcept {
  if (this != &o) {
    (void)Unlink();
    impl_ = std::move(o.impl_);
    data_ = o.data_;
    size_ = o.size_;
    name_ = std::move(o.name_);
    linked_ = o.linked_;
    o.data_ = nullptr;
    o.size_ = 0;
    o.linked_ = false;
  }
  return *this;
}

ShmSegment::~ShmSegment() { (void)Unlink(); }

Status ShmSegment::Unlink() {
  if (!linked_) return Status::Ok();
  linked_ = false;
  if (shm_unlink(name_.c_str()) != 0 && errno != ENOENT) {
    return SysError("shm_unlink", errno, "segment " + name_);
  }
  return Status::Ok();
}

Result<ShmSegment> ShmSegment::Create(const std::string& name, uint64_t bytes, uint32_t owner_uid) {
  MCDMA_RETURN_IF_ERROR(platform::CheckShmName(name));
  if (bytes == 0) return Status(Code::kInvalid, "segment size must be > 0");
  bytes = RoundUpToPage(bytes);
  try {
    bip::permissions perm(0600);
    auto impl = std::make_unique<Impl>();
    bip::shared_memory_object object(bip::create_only, name.c_str(), bip::read_write, perm);
    int fd = object.get_mapping_handle().handle;
    // The umask may have narrowed the mode; make it exactly 0600.
    if (fchmod(fd, 0600) != 0) {
      int err = errno;
      bip::shared_memory_object::remove(name.c_str());
      return SysError("fchmod", err, name);
    }
    if (owner_uid != geteuid() && fchown(fd, owner_uid, static_cast<gid_t>(-1)) != 0) {
      int err = errno;
      bip::shared_memory_object::remove(name.c_str());
      return SysError(
          "fchown", err,
          name + " to uid " + std::to_string(owner_uid) +
              " (serving apps of other users needs root or CAP_CHOWN; segments stay mode 0600)");
    }
    object.truncate(static_cast<bip::offset_t>(bytes));
    // The pages are taken now: a full /dev/shm is an error here, never a
    // SIGBUS on first touch.
    if (Status reserved = platform::ReserveSharedMemory(fd, bytes, name); !reserved.ok()) {
      bip::shared_memory_object::remove(name.c_str());
      return reserved;
    }
    impl->region = bip::mapped_region(object, bip::read_write);
    ShmSegment seg(std::move(impl));
    seg.name_ = name;
    seg.linked_ = true;
    return seg;
  } catch (const bip::interprocess_exception& e) {
    bip::shared_memory_object::remove(name.c_str());
    return Status(Code::kNoMemory, "cannot create shared memory segment " + name + " of " +
                                       std::to_string(bytes) + " bytes: " + e.what());
  }
}

Result<ShmSegment> ShmSegment::Open(const std::string& name, uint64_t bytes) {
  MCDMA_RETURN_IF_ERROR(platform::CheckShmName(name));
  try {
    auto impl = std::make_unique<Impl>();
    bip::shared_memory_object object(bip::open_only, name.c_str(), bip::read_write);
    bip::offset_t actual = 0;
    if (!object.get_size(actual) || static_cast<uint64_t>(actual) != RoundUpToPage(bytes)) {
      return Status(Code::kInvalid, "segment " + name + " has size " + std::to_string(actual) +
                                        ", expected " + std::to_string(RoundUpToPage(bytes)));
    }
    impl->region = bip::mapped_region(object, bip::read_write);
    ShmSegment seg(std::move(impl));
    seg.name_ = name;
    seg.linked_ = false;  // the creator owns the name
    return seg;
  } catch (const bip::interprocess_exception& e) {
    return Status(Code::kNotFound, "cannot map shared memory segment " + name + ": " + e.what());
  }
}

}  // namespace mcdma
