// A thread's time budget (attnlab/core/deadline.hpp).
#include "attnlab/core/deadline.hpp"

namespace attnlab {

namespace {
thread_local bool has_deadline = false;
thread_local std::chrono::steady_clock::time_point deadline;
}  // namespace

DeadlineScope::DeadlineScope(std::chrono::steady_clock::duration budget) : outer_(deadline), had_outer_(has_deadline) {
  deadline = std::chrono::steady_clock::now() + budget;
  has_deadline = true;
}

DeadlineScope::~DeadlineScope() {
  deadline = outer_;
  has_deadline = had_outer_;
}

void check_deadline() {
#if defined(__cpp_exceptions)  // the page's WebAssembly engine has no exceptions and no budget
  if (has_deadline && std::chrono::steady_clock::now() > deadline)
    throw DeadlineExceeded("the work took longer than its time budget");
#endif
}

}  // namespace attnlab
