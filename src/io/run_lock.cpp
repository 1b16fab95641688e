#include "io/run_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>

#include "util/error.hpp"
#include "util/os_error.hpp"

namespace mt {

namespace {

std::string host_name() {
  char buf[256] = {};
  return gethostname(buf, sizeof buf - 1) == 0 ? buf : "unknown host";
}

// The holder as the lock file's "pid@host" text names it.
std::string holder_text(int fd) {
  char holder[300] = {};
  const ssize_t n = pread(fd, holder, sizeof holder - 1, 0);
  std::string who(holder, n > 0 ? size_t(n) : 0);
  while (!who.empty() && who.back() == '\n') who.pop_back();
  const size_t at = who.find('@');
  return at == std::string::npos ? "another process (it has not written its pid yet)"
                                 : "pid " + who.substr(0, at) + " on host " + who.substr(at + 1);
}

}  // namespace

std::string run_lock_holder(const std::string& run_dir) {
  const int fd = ::open((run_dir + "/lock").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  std::string holder;
  if (flock(fd, LOCK_SH | LOCK_NB) != 0) holder = holder_text(fd);
  ::close(fd);  // also drops the shared lock, if taken
  return holder;
}

RunLock::RunLock(const std::string& run_dir) {
  const std::string path = run_dir + "/lock";
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw UserError(path + ": cannot create the run's lock file: " + os_error_text(errno));
  if (flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    const std::string holder = err == EWOULDBLOCK ? holder_text(fd_) : "";
    ::close(fd_);
    if (err != EWOULDBLOCK) throw UserError(path + ": cannot lock: " + os_error_text(err));
    throw UserError(run_dir + ": another moetrain run is writing this run directory: " + holder + " holds " + path +
                    "; wait for it to end (or stop it: a run that is stopped or killed resumes later with its own "
                    "checkpoints), or give this run another run.name");
  }
  const std::string me = std::to_string(getpid()) + "@" + host_name() + "\n";
  // The text only names the holder in the message above; the flock is the lock, so a write that
  // fails (a full disk) changes nothing that matters.
  if (ftruncate(fd_, 0) != 0 || pwrite(fd_, me.data(), me.size(), 0) != ssize_t(me.size())) return;
}

RunLock::~RunLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace mt
