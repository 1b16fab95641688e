#pragma once
// QK-Clip (Kimi K2 report, arXiv 2507.20534, §2.1), optimizer.qk_clip. Every attention forward
// max-accumulates each head's largest pre-softmax logit (after the softmax scale, masked entries left
// out) into this rank's [layers, heads] buffer, over the step's micro-batches. After the optimizer's
// step the buffers of the ranks that hold the same heads (the data-parallel group, with expert
// parallelism inside it, and the DualPipe pair) are all-gathered, and every head h with
// S_h = max > tau has its rows rescaled with gamma = tau / S_h, so that its logits shrink by gamma:
//   MHA (kv_heads = heads): wq's and wk's rows of the head by sqrt(gamma) each.
//   GQA (kv_heads < heads): wq's rows of the head by gamma; the shared key head is left alone, as
//     K2 leaves MLA's shared rotary key (scaling it would clip the other heads of its group too).
//   MLA, per head of qk_nope + qk_rope query rows: the nope rows of wq (or of wq_b, q's low-rank up
//     projection) by sqrt(gamma), the rope rows by gamma; the k_nope rows of wkv_b (each head's first
//     qk_nope of its qk_nope + v_head rows) by sqrt(gamma), its value rows left alone; wkv_a (the
//     latent and the shared rotary key) and wq_a (q's latent) are shared by every head: left alone.
// Under tensor parallelism a rank clips the rows of the heads it holds, under pipeline parallelism
// the layers it holds. The layers are numbered as the model's blocks, then its MTP modules.
#include <vector>

#include "config/config.hpp"
#include "model/model.hpp"
#include "parallel/groups.hpp"
#include "tensor/buffer.hpp"

namespace mt {

class QkClip {
 public:
  // Points every attention layer this rank holds at its row of the buffer.
  QkClip(Model& model, const QkClipConfig& cfg, const ParallelGroups& groups);
  ~QkClip();
  // Queued after the optimizer's step: the gather, the rescaling, and a zeroed buffer for the next step.
  void queue();
  // After the step's download: for every layer of the model the largest logit of the step over its
  // heads and how many heads were clipped (on every rank). Collective over the pipeline and
  // tensor-parallel groups; downloads the gathered maxima.
  void record(std::vector<float>& max_logit, std::vector<float>& clipped_heads) const;
  // The largest logit of each head of each layer this rank holds, [layers * heads] (0 elsewhere).
  std::vector<float> head_maxima() const;
  int layers() const { return layers_; }

 private:
  // One weight's rows to rescale: rows [begin, end) of each head's head_rows, to the power given.
  struct Rows {
    int param, layer, head_rows, begin, end;
    float power;
  };
  void add_layer(AttentionLayer& attn, int layer);
  const Backend& be() const { return model_.backend(); }

  Model& model_;
  QkClipConfig cfg_;
  const ParallelGroups& g_;
  int layers_ = 0, heads_ = 0;  // every layer of the model; this rank's heads per layer
  std::vector<Rows> rows_;
  std::vector<bool> held_;      // [layer]
  Buffer local_, by_dp_, all_;  // [layers, heads]; gathered over dp; then over the DualPipe pair
};

}  // namespace mt
