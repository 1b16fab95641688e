#pragma once
// The whole network: embedding, blocks, final RMSNorm, output head and cross-entropy.
// Each micro-batch runs in a slot: forward() saves what it needs in the slot's arena,
// backward_input() propagates the loss gradient to every layer's input, backward_weight()
// adds the weight gradients, retire() frees the slot.
// Multi-token prediction (report eqs. 21-25): module k (1..D) combines the previous depth's
// hidden state h^{k-1} (h^0: the last block's output) with the embedding of token i+k,
//   h'_i = W_proj [RMSNorm(h^{k-1}_i); RMSNorm(Emb(t_{i+k}))],  h^k = Block_k(h'),
// and predicts token i+k+1 through its own final RMSNorm and the shared output head. Positions
// i >= seq_len - k have no such token: they see token 0 and carry no loss. Slots are independent, so a schedule may
// keep several micro-batches in flight and run weight gradients late.
// Under pipeline parallelism a rank holds one or more chunks, each a stage of the model:
// blocks [first_block, end_block), plus the embedding on the first stage and the final norm,
// head, loss and MTP modules on the last (which also needs the embedding when MTP is on: a
// second copy if the first stage lives elsewhere). A chunk's forward takes the previous
// stage's output and its backward the next stage's input gradient, both in device memory; they
// are copied into the chunk's arena, so the caller's buffers may go once the copy is done (in
// stream order on a GPU). Each chunk has its own slots. Everything the model holds is device
// memory of its backend.
#include <functional>
#include <memory>
#include <vector>

#include "config/config.hpp"
#include "model/block.hpp"

namespace mt {

struct HeadLossArgs;  // model/head_loss.hpp

// Host memory: forward() uploads the tokens into the slot's arena.
struct MicroBatch {
  const int* inputs = nullptr;   // [batch*seq] token ids
  const int* targets = nullptr;  // [batch*seq] next tokens (negative: ignored)
  int batch = 0;
};

// Weights in the objective for one micro-batch: the objective is the mean cross-entropy over
// the global batch's tokens plus the balance loss averaged over the step's balance groups.
struct LossScales {
  float ce = 1.0f;   // 1 / tokens in the global batch
  float aux = 1.0f;  // 1 / balance groups in the global batch (sequences, micro-batches or 1)
  float mtp = 0.0f;  // lambda / (D * sequences in the global batch); depth k divides by seq_len - k
  bool backward = true;  // false: no backward pass follows (evaluation), the head takes no gradients
};

// Where a forward pass adds its losses in device memory, so a step's add up there without the host
// waiting (the ops' `sum`). Null: not summed.
struct LossSums {
  double* ce = nullptr;   // += the cross-entropy summed over the micro-batch's tokens
  double* aux = nullptr;  // += the micro-batch's balance-loss term of the objective, all layers
  // MTP depth k: mtp[k * mtp_stride] += its cross-entropy sum / (mtp_divisor * (seq_len - k - 1)),
  // or / 1 with mtp_divisor 0.
  double* mtp = nullptr;
  int mtp_stride = 0;
  double mtp_divisor = 0;
};

// The losses of a forward given no LossSums, read back at its end (evaluation, tests).
struct ForwardResult {
  double ce_sum = 0;    // summed over the micro-batch's tokens
  double aux_sum = 0;   // the micro-batch's balance-loss term of the objective, all layers
  long tokens = 0;      // counted on the host, also with LossSums
  std::vector<double> mtp_ce_sums;  // per MTP depth, cross-entropy summed over its valid positions
};

struct StageSpec {
  int first_block = 0, end_block = 0;
  bool first = true, last = true;
  // The chunk's own tensor- and expert-parallel communicators and backend (its own stream on a
  // GPU), if not the model's: chunks whose passes run at the same time (DualPipe's overlapped
  // pairs) must not share one.
  DeviceComm* tp = nullptr;
  DeviceComm* ep = nullptr;
  const Backend* backend = nullptr;
  const Backend* side = nullptr;  // the chunk's second stream (LayerEnv::side), if any
};

// Parameters held in pieces over the data-parallel ranks (ZeRO), lent to the model a group at a
// time, in memory of the holder's (ParamStore's lend calls):
//   open/close (ZeRO-2, 3): the gradients of a group's parameters accumulate, in ops queued on the
//     chunk's stream, between open() and close(); the holder then reduce-scatters them.
//   gather/release (ZeRO-3): the values of a group's parameters may be read by ops queued on the
//     chunk's stream between gather() (which all-gathers them) and release().
class ParamShards {
 public:
  virtual ~ParamShards() = default;
  virtual void open(int chunk, const std::vector<int>& ids) = 0;
  virtual void close(int chunk) = 0;
  virtual void gather(int chunk, const std::vector<int>& ids) = 0;
  virtual void release(int chunk) = 0;
};

class Model {
 public:
  // `shard`: the slice of each layer this rank holds; `chunks`: the stages it holds (the whole
  // model by default). `max_in_flight`: slots per chunk.
  Model(const ModelConfig& cfg, uint64_t seed, const Backend& backend, const MatmulSetup& matmul, int max_in_flight,
        const ShardPlace& shard = {}, std::vector<StageSpec> chunks = {});
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  // A chunk's passes. `input`: the previous stage's output [batch*seq, d_model] (ignored on the
  // first stage); `output_grad`: the next stage's input gradient (ignored on the last); both in
  // device memory. `weights_now`: a full backward, whose caller calls backward_weight next: each
  // block's weight gradients follow its input gradients at once, and its backward work lives in
  // the chunk's scratch arena for that block only (as under recomputation, which always does so).
  // `sums`: where the losses add up on the device; null: in the chunk's own sums, read back into
  // the result.
  ForwardResult forward(int chunk, int slot, const MicroBatch& mb, const float* input, const LossScales& scales,
                        const LossSums* sums = nullptr);
  void backward_input(int chunk, int slot, const float* output_grad, bool weights_now = false);
  void backward_weight(int chunk, int slot);
  void retire(int chunk, int slot) { arenas_[chunk][slot].reset(); }
  // After the first training step: the activation arenas know a step's need (Arena::settle).
  void settle_arenas() {
    for (auto& chunk : arenas_)
      for (Arena& a : chunk) a.settle();
    for (Arena& a : scratch_) a.settle();
  }
  // training.recompute: what the blocks keep between forward and backward.
  //   full       only their inputs; each block's forward runs again right before its backward.
  //   selective  all but the cheap, wide parts (RMSNorm outputs, SwiGLU products, MLA's per-head
  //              queries, keys and values), which are computed again right before the backward.
  // Either way the block's forward work (full) or dropped parts (selective) live in the chunk's
  // scratch arena, reused block after block, and the block's weight gradients follow its input
  // gradients at once (a deferred weight pass keeps only the head's and the embedding's).
  // Gradients and losses are bitwise those of no recomputation.
  void set_recompute(Recompute mode) { recompute_ = mode; }
  // The chunk's output after forward (not on the last stage) and its input gradient after
  // backward_input (not on the first), [batch*seq, d_model] in device memory, until retire().
  const float* output(int chunk, int slot) const { return saved_[chunk][slot].acts.back(); }
  const float* input_grad(int chunk, int slot) const { return saved_[chunk][slot].grads[0]; }

  // The whole model (one chunk).
  ForwardResult forward(int slot, const MicroBatch& mb, const LossScales& scales) {
    return forward(0, slot, mb, nullptr, scales);
  }
  void backward_input(int slot, bool weights_now = false) { backward_input(0, slot, nullptr, weights_now); }
  void backward_weight(int slot) { backward_weight(0, slot); }
  void retire(int slot) { retire(0, slot); }
  // A host copy of the output logits [batch*seq, vocab] of the slot's last forward, with
  // set_keep_logits(true): otherwise they exist a chunk at a time, or the loss's gradient
  // overwrites them in place (a micro-batch's largest tensor at a large vocabulary, not held twice).
  std::vector<float> logits_to_host(int slot) const;
  void set_keep_logits(bool keep) { keep_logits_ = keep; }
  // ZeRO-2/3: each group of weight gradients goes to the holder as soon as a micro-batch's
  // backward completes it, and (ZeRO-3) each group of values comes from it just before a pass
  // reads them. grad_groups, value_groups: the groups a chunk's passes open and gather (the holder
  // sizes its memory by them).
  void set_shards(ParamShards* shards, bool values) { shards_ = shards, shard_values_ = values; }
  // A training forward of a last stage with the heads in chunks takes the heads' gradients, one
  // group for the holder (forward_head_group). With `defer` the forward leaves that group open and
  // the caller closes it (close_forward_gradients) from the thread its other passes close theirs on:
  // under ZeRO-2/3 a close sums over the data-parallel communicator, which takes one thread's calls.
  void defer_forward_close(bool defer) { defer_forward_close_ = defer; }
  void close_forward_gradients(int chunk) {
    if (shards_) shards_->close(chunk);
  }
  std::vector<std::vector<int>> grad_groups(int chunk) const;
  std::vector<std::vector<int>> value_groups(int chunk) const;

  const std::vector<StageSpec>& chunks() const { return chunks_; }
  const Backend& backend() const { return env_.be(); }
  const Backend& backend(int chunk) const { return chunk_env_[chunk].be(); }
  // The MoE layers this rank holds, and their indices among all the model's MoE layers (blocks
  // first, then MTP modules).
  std::vector<MoE*> moe_layers();
  std::vector<int> moe_layer_indices() const;
  // Block i (0 <= i < n_layers), or null where another rank holds it.
  Block* block(int i) { return blocks_[size_t(i)].get(); }
  const ModelConfig& config() const { return cfg_; }
  size_t arena_bytes() const;
  // The most activation memory the slots have held at once, summed over them (bytes).
  size_t arena_high_water() const;

  ParamStore params;
  int embedding = -1, final_norm = -1, head = -1;  // -1: not on this rank
  struct MtpModule {
    int hidden_norm, embed_norm, proj, out_norm;  // [d], [d], [d, 2d], [d]
    std::unique_ptr<Block> block;
  };
  std::vector<MtpModule> mtp;

 private:
  struct Saved {
    int rows = 0;
    float aux_scale = 0;  // the forward's balance-loss weight, for a recomputation
    const int* inputs = nullptr;   // device copies of the micro-batch's tokens
    const int* targets = nullptr;
    std::vector<float*> acts;  // inputs of the chunk's blocks; the last entry is its output (this rank's rows)
    const float* top = nullptr;  // a last chunk's output, every row (acts.back() unless sequence parallel)
    float *normed = nullptr, *rstd = nullptr, *logits = nullptr, *dlogits = nullptr, *dnormed = nullptr;
    std::vector<float*> grads;  // gradient w.r.t. each entry of acts (grads[0]: the chunk's input)
    bool blocks_weighted = false;  // the blocks' weight gradients were taken in backward_input
    bool head_done = false;  // the forward took the heads' gradients, chunk by chunk (head_loss.hpp)
    struct Mtp {
      const float* h_prev = nullptr;
      int* tokens = nullptr;
      float *emb = nullptr, *a = nullptr, *a_rstd = nullptr, *b = nullptr, *b_rstd = nullptr, *cat = nullptr;
      float *hp = nullptr, *n = nullptr, *n_rstd = nullptr, *dlogits = nullptr;
      const float* h = nullptr;    // the block's output, every row
      const float* dhp = nullptr;  // the gradient w.r.t. the block's input, every row
      float *dn = nullptr, *dh = nullptr, *da = nullptr, *db = nullptr, *demb = nullptr;
    };
    std::vector<Mtp> mtp;
  };
  // Forward of MTP module k (0-based) of a micro-batch; returns its summed cross-entropy.
  void mtp_forward(int chunk, int slot, int k, const LossScales& scales, const LossSums& sums);
  // The output head and its loss over chunks of rows, with its gradients when a backward follows.
  void head_chunks(int chunk, int slot, const LossScales& scales, double* sum);
  // The RMSNorm whose output a head reads: its weight, its input and the forward's 1/rms.
  struct HeadNorm {
    int weight;
    const float* x;
    const float* rstd;
  };
  // Any head's loss in chunks (the main head's or an MTP module's); when the forward takes the
  // gradients, also the gradient w.r.t. the head's input (into *dx, allocated in the slot's arena)
  // and the head's and the norm's weight gradients.
  void head_in_chunks(int chunk, int slot, const HeadLossArgs& args, const HeadNorm& norm, float** dx);
  // Whether the heads run in chunks (model.head_chunk_tokens).
  bool chunked_head() const { return cfg_.head_chunk_tokens > 0; }

  // The chunk's own sums, zeroed (forward without LossSums), and their values after the forward.
  LossSums own_sums(int chunk);
  void read_own_sums(int chunk, ForwardResult& r);
  // Backward of module k; dh_next is the gradient w.r.t. its output from module k+1 (or null).
  // Returns the gradient w.r.t. its input hidden state.
  float* mtp_backward_input(int chunk, int slot, int k, const float* dh_next);
  void mtp_backward_weight(int chunk, int slot, int k);
  std::vector<float> to_host(const float* device, size_t n) const;
  // The parameters whose weight gradients one piece of a backward pass completes: a block, the
  // head with a norm before it (the final one, or an MTP module's), the rest of an MTP module, the
  // embedding.
  const std::vector<int>& block_group(int block) const { return block_ids_[size_t(block)]; }
  std::vector<int> head_group() const { return {head, final_norm}; }
  // With the heads in chunks, what a forward takes: the head, the final norm and each MTP output norm.
  std::vector<int> forward_head_group() const;
  const std::vector<int>& mtp_group(int k) const { return mtp_rest_ids_[size_t(k)]; }
  // The parameters an MTP module's forward and input-gradient pass read.
  const std::vector<int>& mtp_values(int k) const { return mtp_read_ids_[size_t(k)]; }
  // Runs `weights` (ops adding to the gradients of `ids`) between the holder's open and close.
  void weigh(int chunk, const std::vector<int>& ids, const std::function<void()>& weights);
  // Runs `pass` (ops reading the values of `ids`) between the holder's gather and release.
  void with_values(int chunk, const std::vector<int>& ids, const std::function<void()>& pass);
  // `measure` (capacity or high water) summed over every slot's arenas and the chunks' scratch.
  size_t sum_over_arenas(size_t (Arena::*measure)() const) const;
  ModelConfig cfg_;
  MatmulSetup matmul_;  // env_ points at its recipe
  LayerEnv env_;         // the model's device and shard; chunk_env_ specializes it per chunk
  std::vector<StageSpec> chunks_;
  std::vector<LayerEnv> chunk_env_;  // each chunk's layers: its backend (stream) and communicators
  // The output head's GEMMs: BF16 under FP8 unless fp8.head.
  LayerEnv head_env(int chunk) const {
    return matmul_.fp8_head ? chunk_env_[chunk] : chunk_env_[chunk].high_precision();
  }
  std::vector<std::unique_ptr<Block>> blocks_;  // all n_layers; null where another rank holds it
  std::vector<std::vector<Arena>> arenas_;      // [chunk][slot]
  std::vector<Buffer> own_sums_;                // [chunk] f64: ce, aux, each MTP depth's ce
  // [chunk]: one block's work at a time (its backward when weights follow at once, what
  // recomputation drops or repeats); a chunk runs one pass at a time, whatever its slots.
  std::vector<Arena> scratch_;
  Recompute recompute_ = Recompute::none;
  bool keep_logits_ = false;
  bool defer_forward_close_ = false;
  ParamShards* shards_ = nullptr;
  bool shard_values_ = false;  // ZeRO-3: values come from shards_ too
  std::vector<std::vector<int>> block_ids_;     // [block]: its parameters' ids
  std::vector<std::vector<int>> mtp_rest_ids_;  // [module]: its parameters but the output norm
  std::vector<std::vector<int>> mtp_read_ids_;  // [module]: its parameters, the head and the embedding
  std::vector<std::vector<Saved>> saved_;
};

}  // namespace mt
