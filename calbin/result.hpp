// Errors of the calbin library: every failure names the file, the field and the value.
#pragma once

#include <string>

#include <tl/expected.hpp>

namespace calbin {

struct Error {
  std::string file;     // the file the problem is in (a path as the user gave it)
  std::string field;    // a JSON-pointer-like path, e.g. "models[1].inputs[0].dtype"; may be empty
  std::string message;  // what is wrong, quoting the offending value

  // "file: field: message", omitting empty parts.
  std::string to_string() const {
    std::string text = file;
    if (!field.empty()) {
      text += text.empty() ? "" : ": ";
      text += field;
    }
    if (!message.empty()) {
      text += text.empty() ? "" : ": ";
      text += message;
    }
    return text;
  }
};

template <class T>
using Result = tl::expected<T, Error>;

inline tl::unexpected<Error> fail(std::string file, std::string field, std::string message) {
  return tl::unexpected<Error>(Error{std::move(file), std::move(field), std::move(message)});
}

}  // namespace calbin
