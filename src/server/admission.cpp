// Heavy-work slots and the request on this thread (admission.hpp).
#include "admission.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace attnlab {

namespace {
thread_local RequestScope* current = nullptr;

ServerBusy busy(const HeavySlots& slots) {
  return ServerBusy(fmt::format(
      "the server is busy: all {} slots for heavy work are taken (a training run or an analysis job holds one "
      "until it ends); try again in a moment (small requests are served meanwhile)",
      slots.total()));
}
}  // namespace

std::size_t default_heavy_slots(int cores) {
  const std::size_t c = static_cast<std::size_t>(std::max(1, cores));
  return std::min(c, std::max<std::size_t>(2, c / 4));
}

int HeavySlots::threads_per_job() const {
  std::lock_guard lock(mutex_);
  return std::max(1, cores_ / static_cast<int>(std::max<std::size_t>(1, total_)));
}

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
  budget_.reset();
  if (holds_slot_) slots_.give_back();
  current = outer_;
}

void admit_work(std::uint64_t bytes) {
  RequestScope* scope = current;
  if (!scope || bytes <= kMaxSmallWorkBytes || scope->holds_slot_) return;
  if (!scope->slots_.try_take()) throw busy(scope->slots_);
  scope->holds_slot_ = true;
  scope->budget_.emplace(scope->slots_.threads_per_job());
}

std::shared_ptr<SlotClaim> claim_slot_for_background() {
  RequestScope* scope = current;
  if (!scope) return nullptr;
  if (scope->holds_slot_)
    scope->holds_slot_ = false;  // the request's own slot goes to the work
  else if (!scope->slots_.try_take())
    throw busy(scope->slots_);
  return std::make_shared<SlotClaim>(scope->slots_);
}

}  // namespace attnlab
