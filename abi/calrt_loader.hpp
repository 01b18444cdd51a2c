// calrt_loader.hpp: opens a CalRT runtime shared library by path and returns its checked
// function table as a calrt::Api.
//
// The ICD loaders of Vulkan and OpenCL are the model: dlopen the library, look up the one
// exported entry point (CalrtGetApi), ask it for the ABI major this program was compiled
// against, and refuse a table that does not look like one, before anything calls through
// it. Every failure is a LoadError that names the library path and says what was wrong.
// The returned Api holds the dlopen reference (dlclose runs when the last Api copy, and so
// the last handle created through it, is gone); the library itself stays mapped for the
// life of the process (RTLD_NODELETE, see load_runtime).
#pragma once

#include <dlfcn.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include "abi/calrt.h"
#include "abi/calrt.hpp"

namespace calrt {

// Why a runtime could not be loaded.
enum class LoadErrorKind {
  open_failed,     // dlopen failed: no such file, not a shared library, missing dependency
  symbol_missing,  // the library does not export CalrtGetApi
  no_table,        // CalrtGetApi returned NULL: the runtime does not serve this ABI major
  abi_mismatch,    // the table's abi_major differs from the one asked for
  bad_table,       // implausible struct_size or a missing Error_* entry
};

inline const char* to_string(LoadErrorKind kind) {
  switch (kind) {
    case LoadErrorKind::open_failed:
      return "open_failed";
    case LoadErrorKind::symbol_missing:
      return "symbol_missing";
    case LoadErrorKind::no_table:
      return "no_table";
    case LoadErrorKind::abi_mismatch:
      return "abi_mismatch";
    case LoadErrorKind::bad_table:
      return "bad_table";
  }
  return "?";
}

class LoadError : public std::runtime_error {
 public:
  LoadError(LoadErrorKind kind, std::string origin, const std::string& detail)
      : std::runtime_error("cannot load CalRT runtime " + origin + ": " + detail),
        kind_(kind),
        origin_(std::move(origin)) {}

  LoadErrorKind kind() const noexcept { return kind_; }
  // The library path (or, for an in-process table, a label saying where it came from).
  const std::string& origin() const noexcept { return origin_; }

 private:
  LoadErrorKind kind_;
  std::string origin_;
};

// The smallest table any runtime may return: the header fields and the three Error_*
// entries, without which no error could be reported. Everything after is optional
// (older minor versions end earlier; the wrapper answers UNIMPLEMENTED for what is missing).
inline constexpr size_t kMinApiStructSize = CALRT_STRUCT_SIZE(CalrtApi, Error_GetCode);
// A table claiming more than this is taken for garbage rather than for a newer runtime.
inline constexpr size_t kMaxApiStructSize = size_t{64} * 1024;

// Checks a table returned for `requested_major` before anything calls through it. `origin`
// names where it came from in errors. Used by load_runtime() and for in-process runtimes.
inline void validate_table(const CalrtApi* table, uint32_t requested_major,
                           const std::string& origin) {
  const std::string major_text = std::to_string(requested_major);
  if (table == nullptr) {
    throw LoadError(LoadErrorKind::no_table, origin,
                    "CalrtGetApi(" + major_text +
                        ") returned NULL: the runtime does not "
                        "implement ABI major version " +
                        major_text);
  }
  if (table->abi_major != requested_major) {
    throw LoadError(LoadErrorKind::abi_mismatch, origin,
                    "asked for ABI major " + major_text + ", the table says " +
                        std::to_string(table->abi_major) + "." + std::to_string(table->abi_minor) +
                        "." + std::to_string(table->abi_patch));
  }
  if (table->struct_size < kMinApiStructSize || table->struct_size > kMaxApiStructSize) {
    throw LoadError(LoadErrorKind::bad_table, origin,
                    "implausible table struct_size " + std::to_string(table->struct_size) +
                        " (expected " + std::to_string(kMinApiStructSize) + " to " +
                        std::to_string(kMaxApiStructSize) + "; this header's is " +
                        std::to_string(CALRT_API_STRUCT_SIZE) + ")");
  }
  if (table->Error_Destroy == nullptr || table->Error_Message == nullptr ||
      table->Error_GetCode == nullptr) {
    throw LoadError(LoadErrorKind::bad_table, origin,
                    "the table lacks Error_Destroy, Error_Message or Error_GetCode");
  }
}

// Loads the runtime library at `path` and returns its table for CALRT_ABI_MAJOR.
inline Api load_runtime(const std::filesystem::path& path) {
  const std::string origin = path.string();
  // dlopen searches the library path for a name without '/'; a path is what is meant here.
  const std::string open_name = origin.find('/') == std::string::npos ? "./" + origin : origin;
  // dlopen reads whatever the path names: a FIFO would block it forever, a device node
  // would be read without end. Only a regular file (through any symlinks) can be a library.
  {
    std::error_code error;
    const auto status = std::filesystem::status(open_name, error);
    if (!error && std::filesystem::exists(status) && !std::filesystem::is_regular_file(status)) {
      throw LoadError(LoadErrorKind::open_failed, origin,
                      std::filesystem::is_directory(status)
                          ? "a directory, not a shared library"
                          : "not a regular file (a FIFO, socket or device), not a shared library");
    }
  }
  dlerror();
  // RTLD_NODELETE: a runtime is never unmapped once loaded. Its static state (threads,
  // registries) may outlive the last handle, and unmapping it would turn that state into
  // dangling memory (LeakSanitizer reports it as leaks). PJRT plugins are kept the same way.
  void* library = dlopen(open_name.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (library == nullptr) {
    const char* reason = dlerror();
    throw LoadError(LoadErrorKind::open_failed, origin,
                    reason != nullptr ? reason : "dlopen failed");
  }
  std::shared_ptr<void> keepalive(library, [](void* handle) { dlclose(handle); });
  dlerror();
  void* symbol = dlsym(library, CALRT_GET_API_SYMBOL);
  if (symbol == nullptr) {
    throw LoadError(LoadErrorKind::symbol_missing, origin,
                    std::string("the library does not export ") + CALRT_GET_API_SYMBOL);
  }
  // POSIX guarantees that a dlsym result converts to a function pointer.
  auto* get_api = reinterpret_cast<CalrtGetApiFn*>(symbol);
  const CalrtApi* table = get_api(CALRT_ABI_MAJOR);
  validate_table(table, CALRT_ABI_MAJOR, origin);
  return Api(table, std::move(keepalive));
}

}  // namespace calrt
