// session_handles.hpp: one session's wire ids and the simulator handles they stand for. Ids
// come from one daemon-wide counter and are never reused, so an id of another session or
// one already released can only miss; the kind is checked on every lookup, so a calbin id
// passed as a buffer is refused here instead of reaching the runtime.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <tl/expected.hpp>

namespace simdev::service::server {

enum class HandleKind : uint8_t { device, calbin, buffer, job, kv };
const char* to_string(HandleKind kind);

// The next id of the daemon's lifetime (never 0).
uint64_t next_wire_id();

class HandleTable {
 public:
  // parent: the calbin a buffer, job or KV handle belongs to (0 for none).
  uint64_t add(HandleKind kind, void* handle, uint64_t parent = 0);
  // id 0 is NULL and yields nullptr, so the runtime reports a NULL handle itself. The error
  // names the field and the id.
  tl::expected<void*, std::string> find(uint64_t id, HandleKind kind, const char* field) const;
  void remove(uint64_t id);
  // Forgets the buffers, jobs and KV handles of a calbin (its destroy released them).
  std::vector<uint64_t> remove_children(uint64_t parent);
  std::vector<std::pair<uint64_t, void*>> of_kind(HandleKind kind) const;
  void clear();

 private:
  struct Entry {
    HandleKind kind;
    void* handle;
    uint64_t parent;
  };
  mutable std::mutex mutex_;  // the device lane and the session's wait lane both look up
  std::map<uint64_t, Entry> entries_;
};

}  // namespace simdev::service::server
