#include "train/progress.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>

#include "comm/mpi_comm.hpp"

namespace mt {

namespace {

constexpr const char* kClearLine = "\r\033[K";  // back to column 0, erase to the end of the line

// The terminal's width, 0 when not known (then nothing is cut).
size_t terminal_columns() {
  winsize w{};
  return ioctl(STDOUT_FILENO, TIOCGWINSZ, &w) == 0 ? w.ws_col : 0;
}

std::string number_or_nan(const char* format, double v, bool known) {
  if (!known) return "nan";
  char buf[48];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

}  // namespace

bool progress_in_place(ProgressMode mode) {
  if (mode != ProgressMode::automatic) return mode == ProgressMode::line;
  return isatty(STDOUT_FILENO) && !started_by_mpirun();
}

std::string human_duration(double s) {
  char buf[32];
  if (s < 60) std::snprintf(buf, sizeof buf, "%.0fs", s);
  else if (s < 3600) std::snprintf(buf, sizeof buf, "%dm%02ds", int(s) / 60, int(s) % 60);
  else std::snprintf(buf, sizeof buf, "%dh%02dm", int(s) / 3600, int(s) % 3600 / 60);
  return buf;
}

std::string step_text(const StepReport& r) {
  char mfu[32], mtp[32] = "", buf[320];
  if (r.mfu >= 0) std::snprintf(mfu, sizeof mfu, "%.1f%%", 100 * r.mfu);
  else std::snprintf(mfu, sizeof mfu, "n/a");
  if (r.mtp_loss >= 0) std::snprintf(mtp, sizeof mtp, " | mtp %.4f", r.mtp_loss);
  std::snprintf(buf, sizeof buf,
                "step %5lld/%lld | loss %.4f%s | aux %.5f | lr %.2e | gnorm %.3f | "
                "%.0f tok/s | %.2f GFLOP/s | MFU %s | eta %s",
                r.step, r.steps, r.loss, mtp, r.aux_loss, r.lr, r.grad_norm, r.tokens_per_s, r.flops_per_s / 1e9, mfu,
                human_duration(r.eta_s).c_str());
  return buf;
}

Progress::Progress(ProgressMode mode, int every) : in_place_(progress_in_place(mode)), every_(every) {}

Progress::~Progress() { finish(); }

bool Progress::due(long long step, bool final_step) const {
  if (final_step || step == 1 || step % every_ == 0) return true;
  return in_place_ && Clock::now() - drawn_at_ >= std::chrono::milliseconds(100);
}

void Progress::draw() {
  std::string text = shown_;
  if (size_t cols = terminal_columns(); cols > 1 && text.size() >= cols) text.resize(cols - 1);
  std::fputs(kClearLine, stdout);
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
  drawn_at_ = Clock::now();
}

void Progress::step(const std::string& text) {
  if (!in_place_) {
    std::printf("%s\n", text.c_str());
    std::fflush(stdout);
    return;
  }
  shown_ = text;
  draw();
}

void Progress::message(const std::string& text) {
  if (!shown_.empty()) std::fputs(kClearLine, stdout);
  std::printf("%s\n", text.c_str());
  if (!shown_.empty()) draw();
  std::fflush(stdout);
}

void Progress::finish() {
  if (shown_.empty()) return;
  std::fputs("\n", stdout);
  std::fflush(stdout);
  shown_.clear();
}

std::string summary_line(const RunOutcome& o) {
  const char* status = o.complete ? "complete" : o.interrupted ? "interrupted" : "stopped";
  return "summary: run=" + o.run + " steps=" + std::to_string(o.steps) +
         " loss=" + number_or_nan("%.4f", o.loss, o.loss >= 0) +
         " eval_loss=" + number_or_nan("%.4f", o.eval_loss, o.eval_loss >= 0) +
         " tokens_per_s=" + number_or_nan("%.0f", o.tokens_per_s, o.tokens_per_s > 0) +
         " elapsed_s=" + number_or_nan("%.2f", o.elapsed_s, true) + " status=" + status;
}

}  // namespace mt
