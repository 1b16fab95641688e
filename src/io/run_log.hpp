#pragma once
// runs/<name>/log.h5: the resolved config (TOML text) and run facts as attributes, one
// extendible dataset per metric indexed by step, per-layer expert load and bias (with QK-Clip the
// largest attention logit and the heads clipped per attention layer, /attention/...), the time each
// rank spent in each phase of the step (/timing/rank_phases [step, rank, phase], the phase names
// in its attribute "phases"), and eval loss.
// The file is written in SWMR mode, so `h5py.File(p, "r", libver="latest", swmr=True)` can
// read it while training runs; every row is flushed as it is written.
#include <map>
#include <string>
#include <vector>

#include "io/h5util.hpp"

namespace mt {

struct StepRecord {
  long long step = 0;  // optimizer steps completed (1-based)
  double loss = 0, aux_loss = 0, mtp_loss = 0, lr = 0, grad_norm = 0, tokens_per_s = 0, flops_per_s = 0, mfu = 0;
  double time_forward = 0, time_backward = 0, time_optimizer = 0, time_step = 0;  // seconds
  std::vector<float> expert_load;  // [n_moe_layers * n_experts] fraction of routed tokens
  std::vector<float> expert_bias;  // [n_moe_layers * n_experts] bias after this step's update
  std::vector<float> max_logit;      // QK-Clip: [attention layers] the step's largest logit over each layer's heads
  std::vector<float> clipped_heads;  // QK-Clip: [attention layers] heads rescaled after the step
  std::vector<float> rank_phases;  // [ranks * kPhases] seconds, kPhaseNames order
  std::vector<long long> counters;     // [kCounters] the first rank's device counters, kCounterNames order
  std::vector<long long> op_launches;  // [op kinds] its op launches per kind (ops/backend/counters.hpp)
};

// The device counters of a step (train/step_counters.hpp): the whole step's; the staged
// communicator's copies; the host round trips inside the step before its scalars are read.
inline constexpr int kCounters = 14;
inline constexpr const char* kCounterNames =
    "uploads,upload_bytes,downloads,download_bytes,syncs,allocations,allocation_bytes,releases,op_launches,"
    "staging_copies,staging_bytes,in_step_downloads,in_step_syncs,in_step_allocations";

// Where a rank's step time goes: compute (wall time in forward and backward passes, including
// the communication inside the layers, which tp_comm and ep_comm count and DualPipe's pairs
// may overlap with the other pass), pipeline_wait (blocked on pipeline transfers: the bubble as
// measured), grad_sync, optimizer; step is the whole.
inline constexpr int kPhases = 7;
inline constexpr const char* kPhaseNames = "compute,tp_comm,ep_comm,pipeline_wait,grad_sync,optimizer,step";

// What to do about a damaged <run_dir>/log.h5: the checkpoints are separate files and intact.
std::string damaged_log_advice(const std::string& run_dir);

// The per-step scalar series of the log, by dataset name ("loss", "time/step", ...).
std::vector<std::string> log_scalar_names();

struct RunFacts {
  std::string config_toml;
  std::map<std::string, double> numbers;  // e.g. total_params, flops_per_token
  std::map<std::string, std::string> texts;  // e.g. device
  int moe_layers = 0, experts = 0;
  int attention_layers = 0;  // with QK-Clip (blocks, then MTP modules): /attention/max_logit, clipped_heads
  int ranks = 1;
  // A resume's allowed config changes ("step 40: optimizer.lr 0.003 -> 0.001"), added to the
  // attribute config_changes, one line per resume, after the kept lines of steps <= the resumed one.
  std::string config_change;
};

class RunLog {
 public:
  // Starts log.h5 at `path`. With resume_step > 0 the rows of steps <= resume_step of an
  // existing log are kept (the rest belong to the abandoned part of the run; so does a row that
  // a killed run left half written).
  RunLog(const std::string& path, const RunFacts& facts, long long resume_step);
  ~RunLog();
  // Each row is flushed; a failed write (a full disk) throws UserError naming the file.
  void append(const StepRecord& r);
  void append_eval(long long step, double loss);

 private:
  void create(const std::string& path, const RunFacts& facts);
  void write_row(const StepRecord& r);
  void write_eval(long long step, double loss);
  std::string path_;
  int row_floats_ = 0, phase_floats_ = 0, attention_floats_ = 0;
  h5::Handle file_;
  std::map<std::string, h5::Handle> series_;
};

}  // namespace mt
