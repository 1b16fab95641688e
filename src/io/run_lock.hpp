#pragma once
// <run>/lock: held by the one process that writes a run directory (rank 0 of a multi-rank run),
// so two runs never write one log or one checkpoint. It is an flock(2) lock, which the kernel
// drops when the holder exits however it exits: a killed run leaves nothing that blocks the next
// one. The file's text, "pid@host", only names the holder for the message.
#include <string>

namespace mt {

// "pid N on host H" of the process that holds <run>/lock, or empty when none does (the file may
// stay behind after its holder exits; only a held lock counts).
std::string run_lock_holder(const std::string& run_dir);

class RunLock {
 public:
  // Throws UserError naming the holder's pid and host when another process holds the lock.
  explicit RunLock(const std::string& run_dir);
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace mt
