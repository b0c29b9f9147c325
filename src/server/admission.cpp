// Heavy-work slots and the request on this thread (admission.hpp).
#include "admission.hpp"

#include <fmt/format.h>

namespace attnlab {

namespace {
thread_local RequestScope* current = nullptr;
}  // namespace

bool HeavySlots::try_take() {
  std::lock_guard lock(mutex_);
  if (taken_ >= total_) return false;
  ++taken_;
  return true;
}

void HeavySlots::give_back() {
  std::lock_guard lock(mutex_);
  --taken_;
}

void HeavySlots::resize(std::size_t slots) {
  std::lock_guard lock(mutex_);
  total_ = slots;
}

std::size_t HeavySlots::total() const {
  std::lock_guard lock(mutex_);
  return total_;
}

std::size_t HeavySlots::taken() const {
  std::lock_guard lock(mutex_);
  return taken_;
}

RequestScope::RequestScope(HeavySlots& slots) : slots_(slots), outer_(current) { current = this; }

RequestScope::~RequestScope() {
  if (holds_slot_) slots_.give_back();
  current = outer_;
}

void admit_work(std::uint64_t bytes) {
  RequestScope* scope = current;
  if (!scope || bytes <= kMaxSmallWorkBytes || scope->holds_slot_) return;
  if (!scope->slots_.try_take())
    throw ServerBusy(
        fmt::format("the server is busy: all {} slots for heavy work are taken; try again in a moment "
                    "(small requests are served meanwhile)",
                    scope->slots_.total()));
  scope->holds_slot_ = true;
}

}  // namespace attnlab
