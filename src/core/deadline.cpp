// A thread's time budget and cancel tokens (attnlab/core/deadline.hpp).
#include "attnlab/core/deadline.hpp"

namespace attnlab {

namespace {
thread_local bool has_deadline = false;
thread_local std::chrono::steady_clock::time_point deadline;
thread_local const CancelScope* cancel_scope = nullptr;  // the innermost, linked to the outer ones
}  // namespace

DeadlineScope::DeadlineScope(std::chrono::steady_clock::duration budget) : outer_(deadline), had_outer_(has_deadline) {
  deadline = std::chrono::steady_clock::now() + budget;
  has_deadline = true;
}

DeadlineScope::~DeadlineScope() {
  deadline = outer_;
  has_deadline = had_outer_;
}

CancelScope::CancelScope(const CancelToken& token) : token_(token), outer_(cancel_scope) { cancel_scope = this; }

CancelScope::~CancelScope() { cancel_scope = outer_; }

void check_deadline() {
#if defined(__cpp_exceptions)  // the page's WebAssembly engine has no exceptions and no budget
  for (const CancelScope* scope = cancel_scope; scope; scope = scope->outer_)
    if (scope->token_.cancelled()) throw WorkCancelled("the work was cancelled");
  if (has_deadline && std::chrono::steady_clock::now() > deadline)
    throw DeadlineExceeded("the work took longer than its time budget");
#endif
}

}  // namespace attnlab
