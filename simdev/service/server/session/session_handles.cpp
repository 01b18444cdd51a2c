#include "simdev/service/server/session/session_handles.hpp"

#include <atomic>

namespace simdev::service::server {

const char* to_string(HandleKind kind) {
  switch (kind) {
    case HandleKind::device:
      return "device";
    case HandleKind::calbin:
      return "calbin";
    case HandleKind::buffer:
      return "buffer";
    case HandleKind::job:
      return "job";
    case HandleKind::kv:
      return "KV";
  }
  return "unknown";
}

uint64_t next_wire_id() {
  static std::atomic<uint64_t> counter{0};
  return counter.fetch_add(1, std::memory_order_relaxed) + 1;
}

uint64_t HandleTable::add(HandleKind kind, void* handle, uint64_t parent) {
  const uint64_t id = next_wire_id();
  std::lock_guard lock(mutex_);
  entries_.emplace(id, Entry{kind, handle, parent});
  return id;
}

tl::expected<void*, std::string> HandleTable::find(uint64_t id, HandleKind kind,
                                                   const char* field) const {
  if (id == 0) return nullptr;
  std::lock_guard lock(mutex_);
  const auto it = entries_.find(id);
  if (it == entries_.end()) {
    return tl::unexpected(std::string("field '") + field + "': " + to_string(kind) + " handle " +
                          std::to_string(id) +
                          " is not live in this session (released, never issued, or of "
                          "another session)");
  }
  if (it->second.kind != kind) {
    return tl::unexpected(std::string("field '") + field + "': handle " + std::to_string(id) +
                          " is a " + to_string(it->second.kind) + " handle, not a " +
                          to_string(kind) + " handle");
  }
  return it->second.handle;
}

void HandleTable::remove(uint64_t id) {
  std::lock_guard lock(mutex_);
  entries_.erase(id);
}

std::vector<uint64_t> HandleTable::remove_children(uint64_t parent) {
  std::vector<uint64_t> removed;
  std::lock_guard lock(mutex_);
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (it->second.parent == parent) {
      removed.push_back(it->first);
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
  return removed;
}

std::vector<std::pair<uint64_t, void*>> HandleTable::of_kind(HandleKind kind) const {
  std::vector<std::pair<uint64_t, void*>> out;
  std::lock_guard lock(mutex_);
  for (const auto& [id, entry] : entries_) {
    if (entry.kind == kind) out.emplace_back(id, entry.handle);
  }
  return out;
}

void HandleTable::clear() {
  std::lock_guard lock(mutex_);
  entries_.clear();
}

}  // namespace simdev::service::server
