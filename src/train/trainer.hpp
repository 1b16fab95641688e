#pragma once
// The training loop: each step (step.hpp), its record in the log, evaluation and checkpoints.
#include <memory>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "io/shards.hpp"
#include "model/model.hpp"
#include "ops/backend/device_timer.hpp"
#include "train/step_counters.hpp"
#include "ops/backend/fallback_counts.hpp"
#include "ops/backend/op_profile.hpp"
#include "parallel/groups.hpp"
#include "pipeline/schedule.hpp"
#include "runtime/runtime.hpp"
#include "train/batches.hpp"
#include "train/optimizer.hpp"
#include "train/qk_clip.hpp"
#include "train/step.hpp"

namespace mt {

class Comm;
struct StepRecord;
struct TrainState;

struct TrainOptions {
  bool quiet = false;       // no step lines (tests)
  long long stop_after = 0; // stop (with a checkpoint) after this many steps in total; 0 = run to the end
  bool profile = false;     // time every op kind; rank 0 prints the table at the end
  bool check_capture = false;  // trace every step's ops and check that each could replay the last's
  Comm* world = nullptr;    // the ranks mpirun started, laid out as [parallel] says; null: one rank
};

struct TrainSummary {
  long long first_step = 0, last_step = 0;  // steps run by this invocation: (first, last]
  std::vector<double> losses;               // training loss of each step run
  double last_eval_loss = -1;
  double unigram_entropy = 0;
  double tokens_per_s = 0, elapsed_s = 0;  // over the steps run by this invocation
  bool interrupted = false;
  // --check-capture: whether every rank's steps after the first passed (step_counters.hpp).
  bool capture_failed = false;
  // Device memory per rank, bytes, the most of any rank: the parameters, their gradients, the
  // optimizer's state (AdamW moments, ZeRO-1's buffers), and the activation arenas (allocated;
  // the high water of their use beside).
  struct Memory {
    double weights = 0, gradients = 0, optimizer = 0, activations = 0, activations_used = 0;
    double host_peak = 0, host_estimate = 0;  // the first rank's resident high water, and its estimate (CPU)
  } memory;
  // The GEMMs of every rank and stream that ran another way than their first choice (a GPU's
  // cuBLASLt found no algorithm, an FP8 GEMM ran as fp32): the run's "gemm fallback:" and
  // "fp8 fallback:" lines. Empty on CPUs.
  FallbackCounts fallbacks;
};

class Trainer {
 public:
  explicit Trainer(const Config& cfg, TrainOptions opt = {});
  ~Trainer();
  TrainSummary run();
  Model& model() { return *model_; }
  Optimizer& optimizer() { return *optimizer_; }
  const std::string& run_dir() const { return run_dir_; }

 private:
  // run()'s parts (trainer_open.cpp, trainer_run.cpp), around what it keeps between them.
  struct Running;
  struct Resumption;
  void open_run(Running& r, TrainSummary& summary);
  void make_run_dir(Running& r) const;
  Resumption resume(TrainState& state);
  void announce(const Resumption& res, const TrainState& state) const;
  void open_log(Running& r, const Resumption& res, const TrainSummary& summary);
  FillMicroBatch training_fill(const Running& r) const;
  StepRecord train_step(Running& r, const TrainSummary& summary);
  void record(Running& r, const StepRecord& rec, TrainSummary& summary);
  void evaluate_if_due(Running& r, TrainSummary& summary);
  void report_step(Running& r, const StepRecord& rec, const TrainSummary& summary, bool final_step);
  bool checkpoint_if_due(Running& r, bool final_step);
  // The constructor's parts: the step's plan and schedule (returns the model's slots); the data.
  int plan_steps();
  void open_data();
  TrainSummary::Memory memory_use() const;  // collective over the world
  FallbackCounts fallbacks() const;         // collective over the world
  double evaluate();
  double evaluation_bytes_per_token() const;
  std::string data_order_text() const;
  void print_header() const;
  bool report_capture() const;  // collective over the world; whether every rank passed
  GraphCapture* update_graph() const;  // null: the update is not captured
  void print_attention_shapes() const;  // --profile on a GPU: which attention shapes ran on cuDNN

  Config cfg_;
  TrainOptions opt_;
  std::unique_ptr<Comm> one_rank_;  // the world of a run without mpirun
  // The device, its streams and the communicators: declared before everything that holds device
  // memory or computes on them, so it is destroyed after them.
  Runtime runtime_;
  // The runtime's parts, by the names the step reads.
  ParallelGroups& groups_ = runtime_.groups;
  const TransportChoice& transport_ = runtime_.transport;
  using CommSeconds = Runtime::CommSeconds;
  std::vector<CommSeconds>& comm_seconds_ = runtime_.comm_seconds;
  using CommTimers = Runtime::CommTimers;
  std::vector<CommTimers>& comm_timers_ = runtime_.comm_timers;
  const std::vector<Backend>& chunk_streams_ = runtime_.streams.chunk;  // each chunk's stream; [0]: the device's
  const std::vector<Backend>& side_streams_ = runtime_.streams.side;    // each chunk's second (shared experts)
  const DeviceChoice& device_ = runtime_.device.choice;
  const std::vector<std::string>& rank_devices_ = runtime_.rank_devices;  // every rank's device description
  double eval_bytes_per_token_ = 0;  // text bytes per token of the evaluation's targets
  StepPlan plan_;                    // this rank's share of every step
  pipeline::Schedule schedule_{};    // the step's; one stage of one chunk without a pipeline
  bool lead_ = true;  // world rank 0: prints and logs
  std::string run_dir_;
  std::string layout_;  // as plan prints it: the banner, log.h5 and checkpoints record it
  std::unique_ptr<TokenStream> train_data_, val_data_;
  std::unique_ptr<Batches> train_batches_, val_batches_;  // the training order; the validation windows
  // Declared in the reverse of the order they go back to the backend: the optimizer's buffers
  // before the model's, the model's before the profile it computes through.
  std::unique_ptr<OpProfile> profile_;          // --profile: the model computes through it
  std::unique_ptr<TransferBuffers> transfers_;  // the pipeline's device transfer buffers
  std::unique_ptr<Model> model_;
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<QkClip> qk_clip_;  // optimizer.qk_clip; null without it
  std::unique_ptr<StepScalars> scalars_;  // the step's losses, norm and statistics on the device
  std::unique_ptr<StepCounters> counters_;  // the device counters of each step
  std::vector<OpKindTime> first_step_ops_, profiled_ops_;  // the first step's op times; the sum of the others'
  int profiled_steps_ = 0;  // steps profiled by this run, the first included
};

}  // namespace mt
