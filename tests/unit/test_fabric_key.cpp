// The fabric key file: format, mode, owner and type checks on real files in a
// temporary directory, and how new keys are written.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <openssl/sha.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <type_traits>

#include "mcdma_auth/fabric_key.hpp"

namespace mcdma {
namespace {

static_assert(!std::is_copy_constructible_v<FabricKey>);
static_assert(!std::is_copy_assignable_v<FabricKey>);
static_assert(std::is_nothrow_move_constructible_v<FabricKey>);

// 64 lowercase hex digits of bytes 0x00..0x1f.
std::string CountingHex() {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (int i = 0; i < 32; ++i) {
    out.push_back(kHex[i >> 4]);
    out.push_back(kHex[i & 15]);
  }
  return out;
}

std::array<uint8_t, 32> CountingBytes() {
  std::array<uint8_t, 32> bytes{};
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i);
  return bytes;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

class FabricKeyFile : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/mcdma-fabric-key-XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    dir_ = dir;
    path_ = dir_ + "/fabric.key";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Writes `content` to `path` with exactly `mode`.
  static void Write(const std::string& path, const std::string& content, mode_t mode = 0600) {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ASSERT_GE(fd, 0) << path;
    ASSERT_EQ(::write(fd, content.data(), content.size()), static_cast<ssize_t>(content.size()));
    ASSERT_EQ(::fchmod(fd, mode), 0);
    ::close(fd);
  }

  size_t EntriesInDir() const {
    return static_cast<size_t>(std::distance(std::filesystem::directory_iterator(dir_),
                                             std::filesystem::directory_iterator()));
  }

  std::string dir_;
  std::string path_;
};

TEST(FabricKey, FingerprintIsFirstEightHexOfSha256) {
  // SHA-256(00 01 .. 1f) = 630dcd29...
  EXPECT_EQ(FabricKey::FromBytes(CountingBytes()).Fingerprint(), "630dcd29");
  EXPECT_EQ(FabricKey::FromBytes({}).Fingerprint(), "66687aad");
}

TEST(FabricKey, MoveZeroesTheSource) {
  FabricKey a = FabricKey::FromBytes(CountingBytes());
  FabricKey b = std::move(a);
  EXPECT_TRUE(a.empty());  // NOLINT(bugprone-use-after-move): checking the moved-from state
  EXPECT_TRUE(std::all_of(a.data(), a.data() + a.size(), [](uint8_t c) { return c == 0; }));
  EXPECT_FALSE(b.empty());
  EXPECT_TRUE(std::equal(b.data(), b.data() + b.size(), CountingBytes().begin()));
  FabricKey c = FabricKey::FromBytes({});
  c = std::move(b);
  EXPECT_TRUE(b.empty());  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(c.Fingerprint(), "630dcd29");
}

TEST(FabricKey, GeneratedKeysDiffer) {
  auto a = FabricKey::Generate();
  auto b = FabricKey::Generate();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_FALSE(std::equal(a->data(), a->data() + a->size(), b->data()));
}

TEST_F(FabricKeyFile, WritesLowercaseHexMode0600ThatLoadsBack) {
  ::mode_t old_umask = ::umask(0);  // a permissive umask must not widen the mode
  Status st = WriteNewFabricKey(path_, false);
  ::umask(old_umask);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(ModeOf(path_), 0600u);
  const std::string text = ReadAll(path_);
  ASSERT_EQ(text.size(), 65u);
  EXPECT_EQ(text.back(), '\n');
  EXPECT_TRUE(std::all_of(text.begin(), text.end() - 1, [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
  })) << "not lowercase hex";

  auto key = LoadFabricKey(path_);
  ASSERT_TRUE(key.ok()) << key.status().ToString();
  std::array<uint8_t, 32> raw{};
  for (size_t i = 0; i < raw.size(); ++i) {
    raw[i] = static_cast<uint8_t>(std::stoi(text.substr(2 * i, 2), nullptr, 16));
  }
  EXPECT_TRUE(std::equal(raw.begin(), raw.end(), key->data()));
  EXPECT_EQ(key->Fingerprint(), FabricKey::FromBytes(raw).Fingerprint());
  EXPECT_EQ(EntriesInDir(), 1u);
}

TEST_F(FabricKeyFile, RefusesToOverwriteWithoutForce) {
  ASSERT_TRUE(WriteNewFabricKey(path_, false).ok());
  const std::string before = ReadAll(path_);
  Status st = WriteNewFabricKey(path_, false);
  EXPECT_EQ(st.code(), Code::kAlreadyExists);
  EXPECT_NE(st.message().find(path_), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("--force"), std::string::npos) << st.message();
  EXPECT_EQ(ReadAll(path_), before);
}

TEST_F(FabricKeyFile, RefusesASymlinkOrDirectoryWithoutForce) {
  ASSERT_EQ(::symlink("/nonexistent-target", path_.c_str()), 0);
  EXPECT_EQ(WriteNewFabricKey(path_, false).code(), Code::kAlreadyExists);
  EXPECT_FALSE(std::filesystem::exists("/nonexistent-target"));
  EXPECT_EQ(WriteNewFabricKey(dir_, false).code(), Code::kAlreadyExists);
}

TEST_F(FabricKeyFile, ForceReplacesWholeFileWithMode0600) {
  Write(path_, CountingHex() + "\n", 0644);
  ASSERT_TRUE(WriteNewFabricKey(path_, true).ok());
  EXPECT_NE(ReadAll(path_), CountingHex() + "\n");
  EXPECT_EQ(ModeOf(path_), 0600u);
  EXPECT_TRUE(LoadFabricKey(path_).ok());
  EXPECT_EQ(EntriesInDir(), 1u) << "temporary file left behind";
}

TEST_F(FabricKeyFile, ForceReplacesASymlinkNotItsTarget) {
  const std::string target = dir_ + "/target";
  Write(target, "keep me");
  ASSERT_EQ(::symlink(target.c_str(), path_.c_str()), 0);
  ASSERT_TRUE(WriteNewFabricKey(path_, true).ok());
  EXPECT_EQ(ReadAll(target), "keep me");
  EXPECT_TRUE(std::filesystem::is_regular_file(std::filesystem::symlink_status(path_)));
  EXPECT_TRUE(LoadFabricKey(path_).ok());
}

TEST_F(FabricKeyFile, ForceRefusesADirectory) {
  EXPECT_EQ(WriteNewFabricKey(dir_, true).code(), Code::kInvalid);
  EXPECT_TRUE(std::filesystem::is_directory(dir_));
}

TEST_F(FabricKeyFile, WriteIntoMissingDirectoryIsNotFound) {
  EXPECT_EQ(WriteNewFabricKey(dir_ + "/no/such/dir/key", false).code(), Code::kNotFound);
  EXPECT_EQ(WriteNewFabricKey(dir_ + "/no/such/dir/key", true).code(), Code::kNotFound);
}

TEST_F(FabricKeyFile, AcceptsUppercaseHexWithoutNewlineAndMode0400) {
  std::string upper = CountingHex();
  std::transform(upper.begin(), upper.end(), upper.begin(), ::toupper);
  Write(path_, upper, 0400);
  auto key = LoadFabricKey(path_);
  ASSERT_TRUE(key.ok()) << key.status().ToString();
  EXPECT_TRUE(std::equal(key->data(), key->data() + key->size(), CountingBytes().begin()));
}

TEST_F(FabricKeyFile, RefusesGroupOrOtherPermissionsWithChmodHint) {
  Write(path_, CountingHex() + "\n", 0644);
  auto key = LoadFabricKey(path_);
  EXPECT_EQ(key.status().code(), Code::kPermissionDenied);
  EXPECT_EQ(key.status().message(),
            "fabric key " + path_ + " has mode 0644; it must be 0600 (chmod 600 " + path_ + ")");
  for (mode_t mode : {0640, 0620, 0604, 0602, 0610, 0601, 0660}) {
    ASSERT_EQ(::chmod(path_.c_str(), mode), 0);
    EXPECT_EQ(LoadFabricKey(path_).status().code(), Code::kPermissionDenied) << std::oct << mode;
  }
  ASSERT_EQ(::chmod(path_.c_str(), 0600), 0);
  EXPECT_TRUE(LoadFabricKey(path_).ok());
}

TEST_F(FabricKeyFile, RefusesAFileOwnedBySomeoneElse) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to chown a file to another uid";
  Write(path_, CountingHex() + "\n");
  ASSERT_EQ(::chown(path_.c_str(), 65534, 65534), 0);
  auto key = LoadFabricKey(path_);
  EXPECT_EQ(key.status().code(), Code::kPermissionDenied);
  EXPECT_NE(key.status().message().find("owned by uid 65534"), std::string::npos)
      << key.status().message();
  EXPECT_NE(key.status().message().find("chown 0 " + path_), std::string::npos);
}

TEST_F(FabricKeyFile, RefusesWrongSizes) {
  const std::string hex = CountingHex();
  struct Case {
    const char* what;
    std::string content;
  };
  const Case cases[] = {
      {"31 bytes of hex", hex.substr(0, 62) + "\n"},
      {"33 bytes of hex", hex + "ab\n"},
      {"31 raw bytes", std::string(31, '\x5a')},
      {"32 raw bytes", std::string(32, '\x5a')},
      {"33 raw bytes", std::string(33, '\x5a')},
      {"two newlines", hex + "\n\n"},
      {"empty", ""},
  };
  for (const Case& c : cases) {
    Write(path_, c.content);
    auto key = LoadFabricKey(path_);
    EXPECT_EQ(key.status().code(), Code::kInvalid) << c.what;
    EXPECT_NE(key.status().message().find(path_ + " holds " + std::to_string(c.content.size()) +
                                          " bytes; expected 64 hex digits"),
              std::string::npos)
        << c.what << ": " << key.status().message();
  }
  Write(path_, std::string(32, '\x5a'));
  EXPECT_NE(LoadFabricKey(path_).status().message().find("raw binary keys are not accepted"),
            std::string::npos);
}

TEST_F(FabricKeyFile, RefusesNonHexWithoutQuotingTheContent) {
  std::string text = CountingHex();
  text[10] = 'g';
  Write(path_, text + "\n");
  auto key = LoadFabricKey(path_);
  EXPECT_EQ(key.status().code(), Code::kInvalid);
  EXPECT_NE(key.status().message().find("character 11"), std::string::npos)
      << key.status().message();
  EXPECT_EQ(key.status().message().find(text.substr(0, 10)), std::string::npos);

  Write(path_, CountingHex() + " ");
  EXPECT_EQ(LoadFabricKey(path_).status().code(), Code::kInvalid);
}

TEST_F(FabricKeyFile, RefusesSymlinkDirectoryAndFifo) {
  const std::string real = dir_ + "/real.key";
  Write(real, CountingHex() + "\n");
  ASSERT_EQ(::symlink(real.c_str(), path_.c_str()), 0);
  auto link = LoadFabricKey(path_);
  EXPECT_EQ(link.status().code(), Code::kInvalid);
  EXPECT_NE(link.status().message().find("is a symbolic link"), std::string::npos)
      << link.status().message();

  auto dir = LoadFabricKey(dir_);
  EXPECT_EQ(dir.status().code(), Code::kInvalid);
  EXPECT_NE(dir.status().message().find("is a directory"), std::string::npos);

  const std::string fifo = dir_ + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto f = LoadFabricKey(fifo);
  EXPECT_EQ(f.status().code(), Code::kInvalid);
  EXPECT_NE(f.status().message().find("not a regular file"), std::string::npos);
}

TEST_F(FabricKeyFile, MissingFileSaysHowToCreateOne) {
  auto key = LoadFabricKey(path_);
  EXPECT_EQ(key.status().code(), Code::kNotFound);
  EXPECT_NE(key.status().message().find("mcdmactl fabric-key new " + path_), std::string::npos)
      << key.status().message();
}

}  // namespace
}  // namespace mcdma
