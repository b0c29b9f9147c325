// The cooperative checks of attnlab/core/deadline.hpp: a time budget and cancel tokens, as a
// server's requests use them (the server registers its shutdown token in each request).
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "attnlab/core/attention.hpp"
#include "attnlab/core/deadline.hpp"
#include "random_inputs.hpp"

namespace attnlab {
namespace {

TEST(Deadline, WithoutAScopeCheckingDoesNothing) { EXPECT_NO_THROW(check_deadline()); }

TEST(Deadline, APassedBudgetThrowsDeadlineExceededUntilTheScopeEnds) {
  {
    DeadlineScope scope(std::chrono::seconds(-1));
    EXPECT_THROW(check_deadline(), DeadlineExceeded);
  }
  EXPECT_NO_THROW(check_deadline());
}

TEST(CancelToken, ACancelledTokenStopsTheWorkOfTheThreadThatRegisteredItOnly) {
  CancelToken token;
  CancelScope scope(token);
  EXPECT_NO_THROW(check_deadline());
  bool other_thread_stopped = false;
  std::thread other([&] {
    token.cancel();  // cancelled from another thread, which did not register it
    try {
      check_deadline();
    } catch (const WorkCancelled&) {
      other_thread_stopped = true;
    }
  });
  other.join();
  EXPECT_FALSE(other_thread_stopped);
  EXPECT_TRUE(token.cancelled());
  EXPECT_THROW(check_deadline(), WorkCancelled);
  // Cancelling is not a budget: a server tells the two apart.
  try {
    check_deadline();
  } catch (const DeadlineExceeded&) {
    ADD_FAILURE() << "a cancel was reported as a deadline";
  } catch (const WorkCancelled&) {
  }
}

TEST(CancelToken, AnInnerScopeDoesNotHideAnOuterCancelledToken) {
  CancelToken outer, inner;
  CancelScope outer_scope(outer);
  {
    CancelScope inner_scope(inner);
    EXPECT_NO_THROW(check_deadline());
    outer.cancel();
    EXPECT_THROW(check_deadline(), WorkCancelled);
  }
  EXPECT_THROW(check_deadline(), WorkCancelled);
}

TEST(CancelToken, TheScopeEndingUnregistersTheToken) {
  CancelToken token;
  token.cancel();
  { CancelScope scope(token); }
  EXPECT_NO_THROW(check_deadline());
}

TEST(CancelToken, TheReferenceAttentionStopsBetweenHeadsOnceCancelled) {
  const AttentionInput input = test::random_input(7, 5, 4, 3, 4, 4);
  CancelToken token;
  CancelScope scope(token);
  EXPECT_EQ(attend(input).heads.size(), 3u);
  token.cancel();
  EXPECT_THROW(attend(input), WorkCancelled);
}

}  // namespace
}  // namespace attnlab
