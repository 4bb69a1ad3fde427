// mcdma-cuda-check: a CUDA kernel writes mcdma buffers in place (mapped host
// memory, mcdma/cuda.hpp), the daemons move them to another host as a KV
// hand-off (mcdma/kv.hpp), and a kernel there checks every byte where they
// landed, as does the CPU.
//
//   mcdma-cuda-check probe
//       prints the CUDA devices; exit 77 (with the reason) when there are none
//   mcdma-cuda-check produce --socket S --id ID --layers N --layer-bytes B --allow HOST
//       allocates N buffers, registers each with CUDA (mapped), fills them
//       with a kernel through their device pointers, offers them as hand-off
//       ID and publishes them one by one; waits until one consumer has all
//   mcdma-cuda-check consume --socket S --peer HOST --id ID
//       pulls hand-off ID from HOST, registers each landed buffer with CUDA
//       and counts differing words with a kernel, then on the CPU
//
// The pattern is mcdma-kv-handoff's (layer L, word i = i * 0x9E3779B97F4A7C15
// + L), so either end may also be mcdma-kv-handoff. gpu/run-gpu-check.sh
// runs the two ends on two hosts. Exit codes: 0 every byte verified, 1
// failure, 2 usage, 77 no CUDA device (nothing was tried).
#include <cstdio>
#include <string>
#include <vector>

#include "mcdma/cuda.hpp"
#include "pattern_handoff.hpp"
#include "pattern_kernels.hpp"

namespace {

namespace cuda = mcdma::cuda;
using mcdma::demo::Fail;
using mcdma::demo::HandoffOptions;

constexpr const char* kTool = "mcdma-cuda-check";
constexpr int kNoDevice = 77;

int g_device = 0;  // --device

int FailCuda(const char* what, cudaError_t e) {
  std::fprintf(stderr, "%s: %s: %s: %s\n", kTool, what, cudaGetErrorName(e), cudaGetErrorString(e));
  return 1;
}

// Lists the devices; 0 when `device` is one of them, else the exit code
// (77: none, said why).
int CheckDevices(int device) {
  auto n = cuda::DeviceCount();
  if (!n.ok()) {
    std::printf("SKIP: no CUDA device: %s\n", n.status().message().c_str());
    return kNoDevice;
  }
  for (int d = 0; d < *n; ++d) {
    auto name = cuda::DeviceName(d);
    if (!name.ok()) return Fail(kTool, "device", name.status());
    std::printf("CUDA device %d: %s%s\n", d, name->c_str(), d == device ? " (used)" : "");
  }
  if (device >= *n) {
    std::fprintf(stderr, "%s: --device %d: there are %d devices\n", kTool, device, *n);
    return 2;
  }
  return 0;
}

int Produce(mcdma::Client& client, const HandoffOptions& o) {
  if (int rc = CheckDevices(g_device); rc != 0) return rc;
  std::vector<mcdma::Buffer> layers;
  for (uint32_t i = 0; i < o.layers; ++i) {
    auto b = client.Alloc(o.layer_bytes);
    if (!b.ok()) return Fail(kTool, "alloc", b.status());
    auto mapped = cuda::MappedBuffer::Register(*b, g_device);
    if (!mapped.ok()) return Fail(kTool, "register", mapped.status());
    // The kernel writes the buffer itself, through its device address.
    if (cudaError_t e = cuda::FillPattern(mapped->device_ptr(), b->size() / 8, i);
        e != cudaSuccess) {
      return FailCuda("fill kernel", e);
    }
    std::printf("layer %u: %llu bytes written by a kernel at device address %p (host %p)\n", i,
                static_cast<unsigned long long>(b->size()), mapped->device_ptr(),
                static_cast<void*>(b->data()));
    layers.push_back(*b);
  }
  return mcdma::demo::OfferAndPublish(kTool, client, o, layers);
}

int Consume(mcdma::Client& client, const HandoffOptions& o) {
  if (int rc = CheckDevices(g_device); rc != 0) return rc;
  mcdma::kv::BufferPool pool(client);
  auto imp = mcdma::demo::OpenAndPull(client, o, pool);
  if (!imp.ok()) return Fail(kTool, "pull", imp.status());
  uint64_t total = 0;
  for (uint32_t i = 0; i < (*imp)->buffers().size(); ++i) {
    const mcdma::Buffer& b = (*imp)->buffers()[i];
    const uint64_t n = (*imp)->layer_nbytes()[i];
    auto mapped = cuda::MappedBuffer::Register(b, g_device);
    if (!mapped.ok()) return Fail(kTool, "register", mapped.status());
    uint64_t gpu_bad = 0;
    if (cudaError_t e = cuda::CountMismatches(mapped->device_ptr(), n / 8, i, &gpu_bad);
        e != cudaSuccess) {
      return FailCuda("check kernel", e);
    }
    uint64_t cpu_bad = 0;
    const auto* words = reinterpret_cast<const uint64_t*>(b.data());
    for (uint64_t w = 0; w < n / 8; ++w) cpu_bad += words[w] != w * cuda::kGolden + i ? 1 : 0;
    std::printf("layer %u: %llu bytes, %llu words differ on the GPU, %llu on the CPU\n", i,
                static_cast<unsigned long long>(n), static_cast<unsigned long long>(gpu_bad),
                static_cast<unsigned long long>(cpu_bad));
    if (gpu_bad != 0 || cpu_bad != 0) return 1;
    total += n;
  }
  std::printf("VERIFIED %llu bytes in %zu layers on the GPU and the CPU\n",
              static_cast<unsigned long long>(total), (*imp)->buffers().size());
  return 0;
}

int Main(int argc, char** argv) {
  CLI::App app{"A CUDA kernel writes mcdma buffers; the daemons move them; a kernel checks them."};
  HandoffOptions o;
  o.layer_bytes = 8 << 20;
  auto commands = mcdma::demo::AddHandoffCommands(app, o);
  auto* probe = app.add_subcommand("probe", "list the CUDA devices (exit 77: none)");
  for (auto* sub : {commands.produce, commands.consume}) {
    sub->add_option("--device", g_device, "CUDA device")->check(CLI::Range(0, 1023));
  }
  CLI11_PARSE(app, argc, argv);
  if (probe->parsed()) return CheckDevices(0);
  return mcdma::demo::RunHandoffCommand(kTool, commands, o, Produce, Consume);
}

}  // namespace

int main(int argc, char** argv) { return mcdma::demo::GuardedMain(kTool, Main, argc, argv); }
