// Files written whole or not at all (see files.h).
#include "runtime/files.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "runtime/error.h"

namespace ocrt {

void write_file_atomic(const std::string& path, const std::string& bytes) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  FILE* f = std::fopen(tmp.c_str(), "wb");
  OCRT_CHECK(f != nullptr, "cannot create '", tmp, "' (to write '", path, "'): ", std::strerror(errno));
  bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size() && std::fflush(f) == 0 &&
            ::fsync(::fileno(f)) == 0;
  int err = ok ? 0 : errno;
  if (std::fclose(f) != 0 && ok) ok = false, err = errno;
  if (!ok) {
    std::remove(tmp.c_str());
    fail("cannot write '", tmp, "' (to write '", path, "'): ", std::strerror(err));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    std::remove(tmp.c_str());
    fail("cannot rename '", tmp, "' to '", path, "': ", std::strerror(e));
  }
}

}  // namespace ocrt
