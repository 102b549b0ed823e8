// safetensors reading and writing (format in runtime/safetensors.h). The reader treats the
// file as untrusted: every length, offset and shape is checked before it is used to size an
// allocation or index the buffer, so a damaged file gives an Error naming the file, never a
// crash or a tensor filled from the wrong bytes.
#include "runtime/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <new>
#include <set>
#include <sstream>

#include "runtime/json.h"
#include "runtime/text.h"

namespace ocrt {

// Tensor bytes are copied straight between the file and memory.
static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

namespace {

// The same limit as the reference implementation: a bigger header means a corrupt file.
constexpr uint64_t kMaxHeaderBytes = 100ull * 1000 * 1000;

template <class... Args>
[[noreturn]] void bad_file(const std::string& file, const Args&... args) {
  fail("safetensors file '", file, "': ", args...);
}

struct DTypeName {
  const char* name;
  DType dtype;
};
// BOOL is stored one byte per element, as numpy and PyTorch do, so it reads as uint8.
constexpr DTypeName kDTypes[] = {{"F32", DType::f32}, {"F64", DType::f64}, {"I32", DType::i32},
                                 {"I64", DType::i64}, {"U8", DType::u8},   {"BOOL", DType::u8},
                                 {"I8", DType::i8}};

// A JSON value for an error message, cut short: a hostile header can hold huge arrays.
std::string excerpt(const Json& j) {
  std::string s = j.dump();
  return s.size() <= 100 ? s : s.substr(0, 100) + "...";
}

uint64_t read_u64_le(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// One header entry, checked but not yet read.
struct Entry {
  const std::string* name;
  DType dtype;
  Shape shape;
  uint64_t begin, end;
};

Entry parse_entry(const std::string& file, const std::string& name, const Json& j) {
  auto bad = [&](const auto&... args) { bad_file(file, "tensor '", name, "': ", args...); };
  if (!j.is_object())
    bad("header entry is a JSON ", j.type_name(), ", expected an object with dtype, shape and data_offsets");
  for (const char* key : {"dtype", "shape", "data_offsets"})
    if (!j.contains(key)) bad("header entry has no \"", key, "\": ", excerpt(j));

  Entry e{&name, DType::f32, {}, 0, 0};
  const Json& dt = j.at("dtype");
  if (!dt.is_string()) bad("\"dtype\" must be a string, got ", excerpt(dt));
  auto known = std::find_if(std::begin(kDTypes), std::end(kDTypes),
                            [&](const DTypeName& d) { return dt.as_string() == d.name; });
  if (known == std::end(kDTypes))
    bad("unsupported dtype ", json_quote(dt.as_string()),
        " (ocrt reads F32, F64, I32, I64, U8 and BOOL; F16, BF16 and other types are not supported: "
        "convert the file to float32)");
  e.dtype = known->dtype;

  // Dims are checked one by one, and their product for overflow, because a hostile shape like
  // [2^40, 2^40] would otherwise wrap around and pass the size check below. Zero dims count as
  // 1 here so that the tensor's strides cannot overflow either.
  const Json& shape = j.at("shape");
  if (!shape.is_array()) bad("\"shape\" must be an array of non-negative integers, got ", excerpt(shape));
  int64_t extent = 1;
  for (const Json& d : shape.as_array()) {
    if (!d.is_int() || d.as_int() < 0)
      bad("\"shape\" must be an array of non-negative integers, got ", excerpt(shape));
    e.shape.push_back(d.as_int());
    if (__builtin_mul_overflow(extent, std::max<int64_t>(d.as_int(), 1), &extent))
      bad("shape ", excerpt(shape), " is too large (its size overflows 64 bits)");
  }
  uint64_t nbytes = 0;
  if (__builtin_mul_overflow(uint64_t(numel_of(e.shape)), dtype_size(e.dtype), &nbytes))
    bad("shape ", excerpt(shape), " is too large (its size in bytes overflows 64 bits)");

  const Json& off = j.at("data_offsets");
  bool ok = off.is_array() && off.size() == 2 && off[0].is_int() && off[1].is_int() && off[0].as_int() >= 0 &&
            off[0].as_int() <= off[1].as_int();
  if (!ok) bad("\"data_offsets\" must be [begin, end], two integers with 0 <= begin <= end, got ", excerpt(off));
  e.begin = uint64_t(off[0].as_int());
  e.end = uint64_t(off[1].as_int());
  if (e.end - e.begin != nbytes)
    bad("shape ", excerpt(shape), " of dtype ", dt.as_string(), " needs ", nbytes, " bytes, but data_offsets ",
        excerpt(off), " hold ", e.end - e.begin);
  return e;
}

std::string errno_text(int err) { return std::strerror(err); }

}  // namespace

const char* safetensors_dtype_name(DType dtype) {
  for (const DTypeName& d : kDTypes)
    if (d.dtype == dtype) return d.name;
  fail("safetensors: no name for dtype ", dtype_name(dtype));
}

const Tensor& SafetensorsFile::get(const std::string& tensor_name) const {
  for (const auto& [n, t] : tensors)
    if (n == tensor_name) return t;
  std::ostringstream names;
  const size_t shown = std::min<size_t>(tensors.size(), 40);
  for (size_t i = 0; i < shown; ++i) names << (i ? ", " : "") << tensors[i].first;
  if (shown < tensors.size()) names << ", ... (" << tensors.size() - shown << " more)";
  fail("safetensors file '", name, "' has no tensor '", tensor_name, "'; it holds ", tensors.size(),
       " tensors: ", names.str());
}

bool SafetensorsFile::contains(const std::string& tensor_name) const {
  for (const auto& [n, t] : tensors)
    if (n == tensor_name) return true;
  return false;
}

SafetensorsFile parse_safetensors(const void* data, size_t size, const std::string& file) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  if (size < 8) bad_file(file, "file is only ", size, " bytes, too short to hold the 8-byte header length");
  const uint64_t header_len = read_u64_le(bytes);
  if (header_len > kMaxHeaderBytes)
    bad_file(file, "header length ", header_len, " is larger than the 100 MB limit (not a safetensors file?)");
  if (header_len > size - 8)
    bad_file(file, "header length ", header_len, " runs past the end of the file (", size,
             " bytes; truncated or not a safetensors file?)");

  Json header;
  try {
    header = parse_json(std::string_view(reinterpret_cast<const char*>(bytes + 8), header_len));
  } catch (const Error& e) {
    bad_file(file, "invalid JSON header: ", e.what());
  }
  if (!header.is_object()) bad_file(file, "header is a JSON ", header.type_name(), ", expected an object");

  const unsigned char* buffer = bytes + 8 + header_len;
  const uint64_t buffer_size = size - 8 - header_len;
  SafetensorsFile out;
  out.name = file;
  std::vector<Entry> entries;
  for (const auto& [key, value] : header.as_object()) {
    if (key == "__metadata__") {
      if (!value.is_object()) bad_file(file, "__metadata__ is a JSON ", value.type_name(), ", expected an object");
      for (const auto& [mk, mv] : value.as_object()) {
        if (!mv.is_string())
          bad_file(file, "__metadata__ value for key ", json_quote(mk), " must be a string, got ", excerpt(mv));
        out.metadata[mk] = mv.as_string();
      }
      continue;
    }
    Entry e = parse_entry(file, key, value);
    if (e.end > buffer_size)
      bad_file(file, "tensor '", key, "': data_offsets [", e.begin, ", ", e.end, "] run past the end of the ",
               buffer_size, "-byte data buffer (truncated file?)");
    entries.push_back(std::move(e));
  }

  // Two tensors sharing bytes would be a corrupt file (the format has no aliasing). Empty
  // ranges occupy no bytes and cannot overlap anything.
  std::vector<const Entry*> by_offset;
  for (const Entry& e : entries)
    if (e.end > e.begin) by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(), [](const Entry* a, const Entry* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const Entry& a = *by_offset[i - 1];
    const Entry& b = *by_offset[i];
    if (b.begin < a.end)
      bad_file(file, "tensors '", *a.name, "' [", a.begin, ", ", a.end, "] and '", *b.name, "' [", b.begin, ", ",
               b.end, "] overlap in the data buffer");
  }

  for (const Entry& e : entries) {
    Tensor t = Tensor::empty(e.shape, e.dtype, Device::cpu());
    copy_host_to_tensor(buffer + e.begin, size_t(e.end - e.begin), t);
    out.tensors.emplace_back(*e.name, std::move(t));
  }
  return out;
}

SafetensorsFile load_safetensors(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) bad_file(path, "cannot open: ", errno_text(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    bad_file(path, "cannot stat: ", errno_text(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    bad_file(path, S_ISDIR(st.st_mode) ? "is a directory, not a file" : "is not a regular file");
  }
  // The whole file is read, then copied into tensors: simple, and model files are small.
  std::vector<unsigned char> bytes;
  try {
    bytes.resize(size_t(st.st_size));
  } catch (const std::bad_alloc&) {
    ::close(fd);
    bad_file(path, "file of ", st.st_size, " bytes does not fit in memory");
  }
  size_t got = 0;
  while (got < bytes.size()) {
    ssize_t n = ::read(fd, bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      bad_file(path, "read failed: ", errno_text(err));
    }
    if (n == 0) break;  // the file shrank while we read it; parse what is there
    got += size_t(n);
  }
  ::close(fd);
  bytes.resize(got);
  return parse_safetensors(bytes.data(), bytes.size(), path);
}

void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  NoGradGuard no_grad;  // the layout conversions below must not record autograd history
  // Everything that can be checked is checked before a file is touched.
  std::set<std::string> seen;
  for (const auto& [name, t] : tensors) {
    OCRT_CHECK(t.defined(), "save_safetensors '", path, "': tensor '", name, "' is undefined");
    OCRT_CHECK(name != "__metadata__", "save_safetensors '", path,
               "': \"__metadata__\" is reserved, not a tensor name");
    OCRT_CHECK(seen.insert(name).second, "save_safetensors '", path, "': tensor name '", name, "' appears twice");
  }
  // A reader refuses a header that is not UTF-8 (and the JSON printer would repair it into other
  // names): names and metadata are checked before the file exists.
  auto utf8 = [&](const std::string& text, const char* what) {
    OCRT_CHECK(valid_utf8(text) == text, "save_safetensors '", path, "': tensor names and metadata must be valid UTF-8 (",
               what, " '", text, "')");
  };
  for (const auto& [name, t] : tensors) utf8(name, "tensor name");
  for (const auto& [k, v] : metadata) utf8(k, "metadata key"), utf8(v, "metadata value");

  Json header = Json::object();
  Json::Object& members = header.as_object();
  if (!metadata.empty()) {
    Json m = Json::object();
    for (const auto& [k, v] : metadata) m.as_object().emplace_back(k, Json(v));
    members.emplace_back("__metadata__", std::move(m));
  }
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    const uint64_t nbytes = uint64_t(t.numel()) * t.itemsize();
    Json shape = Json::array();
    for (int64_t d : t.shape()) shape.push_back(Json(d));
    Json entry = Json::object();
    entry.set("dtype", safetensors_dtype_name(t.dtype()));
    entry.set("shape", std::move(shape));
    entry.set("data_offsets", Json(Json::Array{Json(offset), Json(offset + nbytes)}));
    members.emplace_back(name, std::move(entry));
    offset += nbytes;
  }
  std::string text = header.dump();
  // Padding to 8 bytes keeps the data buffer aligned for readers that map the file.
  text.append((8 - text.size() % 8) % 8, ' ');
  unsigned char len_bytes[8];
  for (int i = 0; i < 8; ++i) len_bytes[i] = (uint64_t(text.size()) >> (8 * i)) & 0xFF;

  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) fail("save_safetensors: cannot create '", tmp, "' (to write '", path, "'): ", errno_text(errno));
  auto write_or_throw = [&](const void* p, size_t n) {
    if (n > 0 && std::fwrite(p, 1, n, f) != n) fail("cannot write '", tmp, "': ", errno_text(errno));
  };
  try {
    write_or_throw(len_bytes, 8);
    write_or_throw(text.data(), text.size());
    for (const auto& [name, t] : tensors) {
      Tensor c = t.to(Device::cpu()).contiguous();
      write_or_throw(c.raw_data(), size_t(c.numel()) * c.itemsize());
    }
    if (std::fflush(f) != 0 || ::fsync(::fileno(f)) != 0) fail("cannot flush '", tmp, "': ", errno_text(errno));
    FILE* closing = f;
    f = nullptr;
    if (std::fclose(closing) != 0) fail("cannot close '", tmp, "': ", errno_text(errno));
    if (std::rename(tmp.c_str(), path.c_str()) != 0)
      fail("cannot rename '", tmp, "' to '", path, "': ", errno_text(errno));
  } catch (const std::exception& e) {
    if (f) std::fclose(f);
    std::remove(tmp.c_str());
    fail("save_safetensors: writing '", path, "' failed: ", e.what());
  }

  // The rename itself is durable only once the directory entry is on disk. Best effort: some
  // file systems refuse fsync on a directory, and the file is already complete.
  std::string dir = std::filesystem::path(path).parent_path().string();
  int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace ocrt
