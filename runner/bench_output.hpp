// Writing the text outputs of `calrt bench` (CSV, Chrome trace) atomically, as
// report.hpp's write_json_file does for JSON: a temporary file next to the target, then a
// rename, so that a reader never sees half a file.
#pragma once

#include <filesystem>
#include <string>

namespace runner {

// Returns an empty string on success, else why it failed (naming the file).
std::string write_text_atomically(const std::filesystem::path& path, const std::string& text);

}  // namespace runner
