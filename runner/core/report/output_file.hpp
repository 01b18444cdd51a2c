// output_file.hpp: where a report goes, and how it gets there whole. Output paths come from
// the user, who may be root: the writer must never replace what is not a report.
//   "-"                       standard output.
//   a special file            (a character device such as /dev/null, a FIFO, a socket),
//                             directly or through symlinks: written in place, never replaced;
//                             a FIFO without a reader fails at once instead of blocking.
//   a regular file, a symlink to one, or a new path
//                             written atomically: a temporary file created exclusively in
//                             the target's directory, then renamed over the target. A symlink
//                             is followed, so the link stays and its target is replaced.
// On failure the temporary file is removed and the message names the user's path and the
// system's reason; nothing is left half-written.
#pragma once

#include <filesystem>
#include <string>

namespace runner {

// Checked before any work, so that a run does not end in a report it cannot write: the path
// is not empty, not a directory, its directory exists, and the file can be written there now
// (a special file is writable; for a regular or new file, a probe file is created in its
// directory and removed). Returns an empty string or "FLAG 'PATH': why".
std::string check_output_path(const char* flag, const std::filesystem::path& path);

// The same, and the path is not inside `protected_dir` (the calbin a command reads: a report
// must never replace its manifest or a weight file).
std::string check_output_path(const char* flag, const std::filesystem::path& path,
                              const std::filesystem::path& protected_dir);

// Whether two report paths name the same file (after resolving `.`, `..` and links); false
// when either is empty.
bool same_file(const std::filesystem::path& a, const std::filesystem::path& b);

// Writes `text` to `path` as described above. Returns an empty string on success, else why.
std::string write_text_file(const std::filesystem::path& path, const std::string& text);

}  // namespace runner
