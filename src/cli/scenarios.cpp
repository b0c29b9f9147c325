// attnlab scenarios: the bundled scenarios, one line each.
#include <fmt/format.h>

#include "common.hpp"

namespace attnlab::cli {

Command scenarios_command(CLI::App& parent) {
  CLI::App* app = parent.add_subcommand("scenarios", "List the bundled scenarios");
  return {app, []() {
            const auto all = bundled_scenarios();
            std::size_t width = 0;
            for (const auto& s : all)
              width = std::max(width, s.name.size());
            for (const auto& s : all)
              fmt::print("{:<{}}  {}{}\n", s.name, width, s.description,
                         s.name == kDefaultScenario ? " (default)" : "");
            return 0;
          }};
}

}  // namespace attnlab::cli
