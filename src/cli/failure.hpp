#pragma once
// How a failed command line or a failed command reaches the user: one message on stderr, exit 2.
#include <CLI/CLI.hpp>

#include <exception>

#include "comm/comm.hpp"

namespace mt::cli {

// CLI11 exits 100-114 on a bad command line; moetrain exits 2 on bad input like every other, and without a
// known command it prints the usage and the commands.
int command_line_error(const CLI::App& app, const CLI::ParseError& e, int argc, char** argv);

// The exit status of a command that threw `e`. Under mpirun one rank's failure ends the whole job (this
// does not return there): the others would wait for it forever.
int command_error(const std::exception& e, Comm* world);

}  // namespace mt::cli
