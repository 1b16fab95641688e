#include "train/stop_signal.hpp"

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <string>

#include <fcntl.h>
#include <unistd.h>

namespace mt {

namespace {

// A signal handler can only reach static storage, hence the process-wide flag and the notice the
// first rank writes at once (write(2) is all a handler may call), before the step ends.
volatile std::sig_atomic_t g_stop_requested = 0;
char g_stop_notice[640];
size_t g_stop_notice_size = 0;
bool g_under_mpirun = false;
void request_stop(int) {
  // mpirun stops reading the ranks' output once Ctrl-C has reached it, so a rank blocked in a
  // write to a full pipe would never reach the stop vote: its output stops blocking (what it
  // writes from here may be lost; the checkpoint is not).
  if (g_under_mpirun)
    for (int fd : {STDOUT_FILENO, STDERR_FILENO}) {
      const int flags = fcntl(fd, F_GETFL);
      if (flags >= 0) fcntl(fd, F_SETFL, flags | O_NONBLOCK);
    }
  if (!g_stop_requested && g_stop_notice_size > 0) (void)!write(2, g_stop_notice, g_stop_notice_size);
  g_stop_requested = 1;
}

// What the notice says: under mpirun, Ctrl-C reaches the ranks as SIGTERM and SIGKILL follows
// odls_base_sigkill_timeout seconds later (docs/failures.md), while SIGUSR1 is passed on alone.
void prepare_stop_notice(bool final_checkpoint) {
  std::string text = std::string("moetrain: stop requested: finishing the step in progress") +
                     (final_checkpoint ? ", then writing a checkpoint" : "") + "\n";
  g_under_mpirun = std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr;
  if (g_under_mpirun)
    text += "moetrain: under mpirun, Ctrl-C or SIGTERM is followed by SIGKILL odls_base_sigkill_timeout seconds later "
            "(1 by default): when a step takes longer, stop with kill -USR1 <mpirun's pid>, or start mpirun with "
            "--mca odls_base_sigkill_timeout 60\n";
  g_stop_notice_size = std::min(text.size(), sizeof g_stop_notice);
  std::memcpy(g_stop_notice, text.data(), g_stop_notice_size);
}

}  // namespace

StopSignals::StopSignals(bool notice, bool final_checkpoint) {
  g_stop_requested = 0;
  g_stop_notice_size = 0;
  if (notice) prepare_stop_notice(final_checkpoint);
  old_int_ = std::signal(SIGINT, request_stop);
  old_term_ = std::signal(SIGTERM, request_stop);
  old_usr1_ = std::signal(SIGUSR1, request_stop);
}

StopSignals::~StopSignals() {
  std::signal(SIGINT, old_int_);
  std::signal(SIGTERM, old_term_);
  std::signal(SIGUSR1, old_usr1_);
}

bool StopSignals::requested() { return g_stop_requested != 0; }

}  // namespace mt
