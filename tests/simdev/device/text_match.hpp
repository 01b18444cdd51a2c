// text_match.hpp: the substring test the device tests use on messages.
#pragma once

#include <string>

namespace simdev {

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace simdev
