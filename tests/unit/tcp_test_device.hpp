// Tcp devices for the tcp transport's own tests: listening on 127.0.0.1,
// with a short connect timeout, caps forced when given.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>

#include "driver/tcp/tcp_transport.hpp"
#include "driver/transport.hpp"

namespace mcdma::driver::tcp {

inline TcpOptions LocalOptions(const Caps* caps = nullptr) {
  TcpOptions options;
  options.listen_address = "127.0.0.1";
  if (caps != nullptr) options.caps = *caps;
  options.connect_timeout = std::chrono::milliseconds(5000);
  return options;
}

// A device, or null (and a test failure) when it cannot be made.
inline std::unique_ptr<Device> MakeDevice(const TcpOptions& options) {
  auto device = CreateTcpDevice(options);
  EXPECT_TRUE(device.ok()) << device.status().ToString();
  return device.ok() ? std::move(device).value() : nullptr;
}

inline std::unique_ptr<Device> MakeDevice(const Caps* caps = nullptr) {
  return MakeDevice(LocalOptions(caps));
}

}  // namespace mcdma::driver::tcp
