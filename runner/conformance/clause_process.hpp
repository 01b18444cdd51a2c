// Each conformance clause runs in a child process of its own (fork, no exec), so that the
// runtime under test cannot take the suite down: a segfault, an abort or an exit(0) inside
// the runtime ends that child, the clause fails with what happened, and the suite goes on to
// write its reports. A clause that outlives its bound is killed, not abandoned on a thread.
// Each child starts from the parent's state, so what one clause leaks never reaches the next.
#pragma once

#include <chrono>
#include <functional>
#include <string>

namespace runner {

struct ChildVerdict {
  enum class Kind { pass, fail, skip } kind = Kind::pass;
  std::string reason;
};

// Runs `body` in a forked child and returns its verdict, or a failure that says how the
// child ended: killed by a signal, exited before the clause returned, or past `bound` (then
// killed with SIGKILL). Never throws; stdio is flushed before the fork so that buffered
// lines are not written twice.
ChildVerdict run_in_child(const std::function<ChildVerdict()>& body,
                          std::chrono::milliseconds bound);

}  // namespace runner
