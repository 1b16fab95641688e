// `moetrain keys`: the reference of every experiment key, as Markdown.
#include <cstdio>

#include "cli/command.hpp"
#include "config/reference.hpp"

namespace mt::cli {

Command add_keys(CLI::App& app) {
  CLI::App* keys = app.add_subcommand("keys", "Print every experiment key with its type, valid values and default");
  return {keys, [] {
            std::fputs(mt::config_reference_markdown().c_str(), stdout);
            return 0;
          }};
}

}  // namespace mt::cli
