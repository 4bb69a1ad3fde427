// DLPack export of an mcdma::Buffer as a 1-D uint8 CPU tensor.
//
// The structs below are the DLPack ABI (dlpack.h, v1.0 layout; the legacy
// DLManagedTensor is unchanged since v0.2), declared here because Debian's
// pybind11 does not ship dlpack.h. Both capsule kinds follow the protocol:
// a consumer renames the capsule ("used_dltensor[_versioned]") and calls the
// deleter when done; an unconsumed capsule calls it when collected.
#include <memory>

#include "buffer.hpp"

namespace py = pybind11;

namespace mcdma::python {
namespace {

struct DlDevice {
  int32_t device_type;
  int32_t device_id;
};
struct DlDataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};
struct DlTensor {
  void* data;
  DlDevice device;
  int32_t ndim;
  DlDataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
};
struct DlManagedTensor {
  DlTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DlManagedTensor* self);
};
struct DlPackVersion {
  uint32_t major;
  uint32_t minor;
};
struct DlManagedTensorVersioned {
  DlPackVersion version;
  void* manager_ctx;
  void (*deleter)(DlManagedTensorVersioned* self);
  uint64_t flags;
  DlTensor dl_tensor;
};
static_assert(sizeof(DlTensor) == 48, "DLTensor ABI");
static_assert(sizeof(DlManagedTensor) == 64, "DLManagedTensor ABI");
static_assert(sizeof(DlManagedTensorVersioned) == 80, "DLManagedTensorVersioned ABI");

constexpr DlDevice kCpu{1, 0};         // kDLCPU
constexpr DlDataType kUint8{1, 8, 1};  // kDLUInt, 8 bits, 1 lane
constexpr DlPackVersion kDlpackVersion{1, 0};

// Owns what the tensor points at: the buffer (its mapping) and the shape.
// The consumer deletes it through the deleter, from any thread.
template <typename Managed>
struct Holder {
  Managed managed{};
  Buffer buffer;
  int64_t shape[1] = {0};
  int64_t strides[1] = {1};
};

template <typename Managed>
void Delete(Managed* self) {
  auto* holder = static_cast<Holder<Managed>*>(self->manager_ctx);
  DropBuffer(holder->buffer);
  delete holder;
}

template <typename Managed>
Managed* NewManaged(const Buffer& buffer) {
  auto holder = std::make_unique<Holder<Managed>>();
  holder->buffer = buffer;
  holder->shape[0] = static_cast<int64_t>(buffer.size());
  DlTensor& t = holder->managed.dl_tensor;
  t.data = buffer.data();
  t.device = kCpu;
  t.ndim = 1;
  t.dtype = kUint8;
  t.shape = holder->shape;
  t.strides = holder->strides;
  t.byte_offset = 0;
  holder->managed.manager_ctx = holder.get();
  holder->managed.deleter = &Delete<Managed>;
  return &holder.release()->managed;
}

template <typename Managed>
void DeleteUnconsumed(PyObject* capsule, const char* name) {
  // Renamed by a consumer: the consumer owns the tensor now.
  if (PyCapsule_IsValid(capsule, name) == 0) return;
  auto* managed = static_cast<Managed*>(PyCapsule_GetPointer(capsule, name));
  if (managed != nullptr) managed->deleter(managed);
}

}  // namespace

py::capsule MakeDlpackCapsule(const Buffer& buffer, bool versioned) {
  PyObject* capsule = nullptr;
  if (versioned) {
    auto* m = NewManaged<DlManagedTensorVersioned>(buffer);
    m->version = kDlpackVersion;
    m->flags = 0;  // writable, not a copy
    capsule = PyCapsule_New(m, "dltensor_versioned", [](PyObject* c) {
      DeleteUnconsumed<DlManagedTensorVersioned>(c, "dltensor_versioned");
    });
    if (capsule == nullptr) m->deleter(m);
  } else {
    auto* m = NewManaged<DlManagedTensor>(buffer);
    capsule = PyCapsule_New(m, "dltensor",
                            [](PyObject* c) { DeleteUnconsumed<DlManagedTensor>(c, "dltensor"); });
    if (capsule == nullptr) m->deleter(m);
  }
  if (capsule == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::capsule>(capsule);
}

}  // namespace mcdma::python
