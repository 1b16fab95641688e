#pragma once
// The words for a failed system call, with a full disk said plainly.
#include <cerrno>
#include <cstring>
#include <string>

namespace mt {

inline std::string disk_full_text() { return "the disk is full (" + std::string(std::strerror(ENOSPC)) + ")"; }

inline std::string os_error_text(int err) { return err == ENOSPC ? disk_full_text() : std::strerror(err); }

}  // namespace mt
