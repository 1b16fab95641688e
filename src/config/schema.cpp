#include "config/schema.hpp"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <sstream>

namespace mt {

namespace {

std::string type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    default: return "a date/time";
  }
}

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr double kInf = std::numeric_limits<double>::infinity();

// Limits of the integer keys: far above what published runs use, and low enough that the
// products the trainer forms (rows x features, experts x hidden units) stay exact.
constexpr int64_t kWidth = int64_t(1) << 20;     // a hidden size, a sequence length
constexpr int64_t kCount = int64_t(1) << 16;     // experts, ranks of one kind, sequences per pass, d_model
constexpr int64_t kHeads = 4096;                 // heads, features per head
constexpr int64_t kSmall = 1024;                 // layers, shared experts, pipeline chunks
constexpr int64_t kSteps = 1'000'000'000;        // steps and intervals counted in steps
constexpr int64_t kVocab = int64_t(1) << 24;

// Digits with an optional sign and TOML's underscores: an integer too large for TOML, which
// --set then hands over as text.
bool looks_integer(const std::string& s) {
  size_t i = s.size() > 1 && (s[0] == '-' || s[0] == '+') ? 1 : 0;
  if (i == s.size()) return false;
  for (; i < s.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(s[i])) && s[i] != '_') return false;
  return true;
}

// A decimal number (1e999) that does not fit a double, which --set hands over as text.
bool looks_real(const std::string& s) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  return !s.empty() && end == s.c_str() + s.size() && std::isinf(v) && s.find_first_of("iI") == std::string::npos;
}

std::string fmt(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

class Binder {
 public:
  explicit Binder(std::vector<Field>& out) : out_(out) {}

  template <class Int>
  void integer(const std::string& key, Int& target, int64_t lo, int64_t hi, const std::string& doc) {
    const std::string valid = hi == kMax ? ">= " + std::to_string(lo)
                                         : "in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
    const std::string too_big = hi == kMax ? "out of range (at most " + std::to_string(kMax) + ", TOML's largest)"
                                           : "out of range (at most " + std::to_string(hi) + ")";
    out_.push_back(Field{key, "integer", valid, doc,
        [&target, lo, hi, valid, too_big](const toml::node& n) -> std::string {
          // --set reads a number TOML cannot hold as a string; say what it is.
          if (n.is_string() && looks_integer(n.as_string()->get()))
            return "= " + n.as_string()->get() + " is " +
                   (n.as_string()->get()[0] == '-' ? "out of range (at least " + std::to_string(lo) + ")" : too_big);
          if (!n.is_integer()) return "must be an integer " + valid + ", got " + type_name(n);
          int64_t v = n.as_integer()->get();
          if (v > hi) return "= " + std::to_string(v) + " is " + too_big;
          if (v < lo) return "must be " + valid + ", got " + std::to_string(v);
          target = Int(v);
          return "";
        },
        [&target](toml::table& t, const std::string& leaf) { t.insert_or_assign(leaf, int64_t(target)); }});
  }

  void flag(const std::string& key, bool& target, const std::string& doc) {
    out_.push_back(Field{key, "boolean", "true | false", doc,
        [&target](const toml::node& n) -> std::string {
          if (!n.is_boolean()) return "must be true or false, got " + type_name(n);
          target = n.as_boolean()->get();
          return "";
        },
        [&target](toml::table& t, const std::string& leaf) { t.insert_or_assign(leaf, target); }});
  }

  // Floats accept integers too (lr = 1 means 1.0). lo_open/hi_open make a bound exclusive.
  void real(const std::string& key, double& target, double lo, double hi, bool lo_open, bool hi_open,
            const std::string& doc) {
    std::string valid;
    if (std::isinf(hi)) valid = (lo_open ? "> " : ">= ") + fmt(lo);
    else valid = std::string(lo_open ? "(" : "[") + fmt(lo) + ", " + fmt(hi) + (hi_open ? ")" : "]");
    out_.push_back(Field{key, "float", valid, doc,
        [&target, lo, hi, lo_open, hi_open, valid](const toml::node& n) -> std::string {
          if (n.is_string() && looks_real(n.as_string()->get()))
            return "= " + n.as_string()->get() + " is out of range (a float must be finite, at most about 1.8e308)";
          std::optional<double> v = n.value<double>();
          if (!v || !(n.is_floating_point() || n.is_integer()))
            return "must be a number " + valid + ", got " + type_name(n);
          bool ok = std::isfinite(*v) && (lo_open ? *v > lo : *v >= lo) && (hi_open ? *v < hi : *v <= hi);
          if (!ok) return "must be " + valid + ", got " + fmt(*v);
          target = *v;
          return "";
        },
        [&target](toml::table& t, const std::string& leaf) { t.insert_or_assign(leaf, target); }});
  }

  void text(const std::string& key, std::string& target, const std::string& doc) {
    out_.push_back(Field{key, "string", "any non-empty string", doc,
        [&target](const toml::node& n) -> std::string {
          if (!n.is_string()) return "must be a string, got " + type_name(n);
          if (n.as_string()->get().empty()) return "must not be empty";
          target = n.as_string()->get();
          return "";
        },
        [&target](toml::table& t, const std::string& leaf) { t.insert_or_assign(leaf, target); }});
  }

  // A number >= lo, or `word` for the case no number names (stored as 0).
  void real_or_word(const std::string& key, double& target, double lo, const std::string& word,
                    const std::string& doc) {
    const std::string valid = "\"" + word + "\" | a number >= " + fmt(lo);
    out_.push_back(Field{key, "float or string", valid, doc,
        [&target, lo, word, valid](const toml::node& n) -> std::string {
          if (n.is_string()) {
            const std::string& got = n.as_string()->get();
            if (got == word) { target = 0; return ""; }
            if (looks_real(got)) return "= " + got + " is out of range (a float must be finite, at most about 1.8e308)";
            return "must be " + valid + ", got \"" + got + "\"";
          }
          std::optional<double> v = n.value<double>();
          if (!v || !(n.is_floating_point() || n.is_integer())) return "must be " + valid + ", got " + type_name(n);
          if (!std::isfinite(*v) || *v < lo) return "must be " + valid + ", got " + fmt(*v);
          target = *v;
          return "";
        },
        [&target, word](toml::table& t, const std::string& leaf) {
          if (target == 0) t.insert_or_assign(leaf, word);
          else t.insert_or_assign(leaf, target);
        }});
  }

  // An array of exactly `targets.size()` finite numbers.
  void reals(const std::string& key, std::vector<double*> targets, const std::string& doc) {
    const std::string valid = "an array of " + std::to_string(targets.size()) + " finite numbers";
    out_.push_back(Field{key, "array", valid, doc,
        [targets, valid](const toml::node& n) -> std::string {
          const toml::array* a = n.as_array();
          if (!a) return "must be " + valid + ", got " + type_name(n);
          if (a->size() != targets.size())
            return "must be " + valid + ", got " + std::to_string(a->size()) + " values";
          for (size_t i = 0; i < targets.size(); ++i) {
            std::optional<double> v = (*a)[i].value<double>();
            if (!v || !((*a)[i].is_floating_point() || (*a)[i].is_integer()) || !std::isfinite(*v))
              return "must be " + valid + ", got " + type_name((*a)[i]) + " at position " + std::to_string(i + 1);
          }
          for (size_t i = 0; i < targets.size(); ++i) *targets[i] = *(*a)[i].value<double>();
          return "";
        },
        [targets](toml::table& t, const std::string& leaf) {
          toml::array a;
          for (double* v : targets) a.push_back(*v);
          t.insert_or_assign(leaf, std::move(a));
        }});
  }

  template <class E>
  void choice(const std::string& key, E& target, const std::string& doc) {
    std::string valid;
    for (const auto& [name, v] : Names<E>::list) valid += (valid.empty() ? "\"" : " | \"") + std::string(name) + "\"";
    out_.push_back(Field{key, "string", valid, doc,
        [&target, valid](const toml::node& n) -> std::string {
          if (!n.is_string()) return "must be one of " + valid + ", got " + type_name(n);
          const std::string& got = n.as_string()->get();
          for (const auto& [name, v] : Names<E>::list)
            if (got == name) { target = v; return ""; }
          return "must be one of " + valid + ", got \"" + got + "\"";
        },
        [&target](toml::table& t, const std::string& leaf) {
          t.insert_or_assign(leaf, std::string(name_of(target)));
        }});
  }

 private:
  std::vector<Field>& out_;
};


}  // namespace

std::vector<Field> schema_fields(Config& c) {
  std::vector<Field> f;
  Binder b(f);
  b.text("run.name", c.run.name, "run name, one folder name (no /); outputs go to <out_dir>/<name>/");
  b.text("run.out_dir", c.run.out_dir, "directory holding run directories");
  b.integer("run.seed", c.run.seed, 0, kMax, "seed of the initial weights and of the shuffled data order");

  auto& m = c.model;
  b.integer("model.vocab_size", m.vocab_size, 2, kVocab, "vocabulary size (shards hold token ids below 65536)");
  b.integer("model.d_model", m.d_model, 1, kCount, "hidden size");
  b.integer("model.n_layers", m.n_layers, 1, kSmall, "transformer blocks");
  b.integer("model.n_dense_layers", m.n_dense_layers, 0, kSmall,
            "first blocks with a dense SwiGLU FFN; the rest are MoE");
  b.integer("model.n_heads", m.n_heads, 1, kHeads, "attention heads");
  b.integer("model.head_dim", m.head_dim, 2, kHeads, "mha: features per head (even: RoPE rotates pairs)");
  b.integer("model.ffn_hidden", m.ffn_hidden, 1, kWidth, "hidden size of the dense SwiGLU FFN");
  b.integer("model.seq_len", m.seq_len, 1, kWidth, "tokens per training sequence");
  b.real("model.rope_theta", m.rope_theta, 0, kInf, true, false, "RoPE base");
  b.real("model.norm_eps", m.norm_eps, 0, 1, true, true, "RMSNorm epsilon");
  b.real("model.init_std", m.init_std, 0, kInf, true, false, "std of the normal initial weights");

  auto& y = m.rope_scaling;
  b.choice("model.rope_scaling.kind", y.kind,
           "RoPE scaling for long context: none, or yarn (DeepSeek-V3's context extension)");
  b.real("model.rope_scaling.factor", y.factor, 1, kInf, false, false, "yarn: context extension factor s");
  b.integer("model.rope_scaling.original_seq_len", y.original_seq_len, 1, kWidth,
            "yarn: the context RoPE was trained at (Hugging Face: original_max_position_embeddings)");
  b.real("model.rope_scaling.beta_fast", y.beta_fast, 0, kInf, true, false,
         "yarn: pairs turning more often than this over the original context keep their frequency");
  b.real("model.rope_scaling.beta_slow", y.beta_slow, 0, kInf, true, false,
         "yarn: pairs turning less often than this are interpolated (frequency / factor)");
  b.real("model.rope_scaling.mscale", y.mscale, 0, kInf, false, false,
         "yarn: cos and sin scale by m(mscale) / m(mscale_all_dim), m(x) = 0.1 x ln(factor) + 1");
  b.real("model.rope_scaling.mscale_all_dim", y.mscale_all_dim, 0, kInf, false, false,
         "yarn: the attention scale multiplies by m(mscale_all_dim)^2 (0: unchanged)");

  auto& a = m.attention;
  b.choice("model.attention.kind", a.kind,
           "multi-head attention, or DeepSeek's multi-head latent attention");
  b.integer("model.attention.n_kv_heads", a.n_kv_heads, 0, kHeads,
            "mha: key/value heads, grouped-query attention (0 = n_heads)");
  b.integer("model.attention.q_lora_rank", a.q_lora_rank, 0, kWidth, "mla: query compression rank (0 = none)");
  b.integer("model.attention.kv_lora_rank", a.kv_lora_rank, 1, kWidth, "mla: key-value compression rank");
  b.integer("model.attention.qk_nope_head_dim", a.qk_nope_head_dim, 1, kHeads,
            "mla: query/key features per head without RoPE");
  b.integer("model.attention.qk_rope_head_dim", a.qk_rope_head_dim, 2, kHeads,
            "mla: decoupled RoPE features per head (even)");
  b.integer("model.attention.v_head_dim", a.v_head_dim, 1, kHeads, "mla: value features per head");

  auto& e = m.moe;
  b.integer("model.moe.n_routed_experts", e.n_routed_experts, 1, kCount, "routed experts per MoE layer");
  b.integer("model.moe.n_shared_experts", e.n_shared_experts, 0, kSmall, "shared experts per MoE layer (every token)");
  b.integer("model.moe.top_k", e.top_k, 1, kCount, "routed experts chosen per token");
  b.integer("model.moe.expert_hidden", e.expert_hidden, 1, kWidth, "hidden size of each expert's SwiGLU");
  b.real("model.moe.route_scale", e.route_scale, 0, kInf, true, false, "factor on the normalised gates");
  b.integer("model.moe.n_groups", e.n_groups, 1, kCount, "expert groups for group-limited routing (1 = off)");
  b.integer("model.moe.topk_groups", e.topk_groups, 1, kCount, "groups a token may route into");
  b.real("model.moe.bias_update_speed", e.bias_update_speed, 0, kInf, false, false,
         "gamma: step of the auxiliary-loss-free bias after every optimizer step (0 = off)");
  b.choice("model.moe.aux_loss", e.aux_loss,
           "balance loss alpha sum_i f_i P_i, computed per sequence, per micro-batch or over the global batch");
  b.real("model.moe.aux_alpha", e.aux_alpha, 0, kInf, true, false, "alpha: weight of the balance loss");

  b.integer("model.mtp.depth", m.mtp.depth, 0, kSmall, "multi-token prediction depth D (0 = off)");
  b.real("model.mtp.weight", m.mtp.weight, 0, kInf, false, false, "lambda: weight of the MTP loss");
  b.integer("model.head_chunk_tokens", m.head_chunk_tokens, 0, kWidth,
            "tokens whose output logits exist at once: the head's GEMM, the cross-entropy and the head's "
            "gradients run per chunk of this many tokens in the forward pass (MTP heads too), so a "
            "[tokens, vocab] tensor never exists whole; 0 = the whole micro-batch, gradients in the backward");

  b.text("data.train", c.data.train, "training shards: a path or a glob (llm.c format)");
  b.text("data.val", c.data.val, "validation shards: a path or a glob");
  b.flag("data.shuffle", c.data.shuffle,
         "read the training windows in a random order from run.seed, a fresh one each epoch (false: file order)");

  auto& t = c.training;
  b.integer("training.steps", t.steps, 1, kSteps, "optimizer steps");
  b.integer("training.global_batch", t.global_batch, 1, kWidth, "sequences per optimizer step");
  b.integer("training.micro_batch", t.micro_batch, 1, kCount, "sequences per forward/backward pass");
  b.real("training.grad_clip", t.grad_clip, 0, kInf, false, false, "max global gradient norm (0 = off)");
  b.integer("training.eval_every", t.eval_every, 0, kSteps, "steps between validation passes (0 = off)");
  b.integer("training.eval_sequences", t.eval_sequences, 1, kWidth,
            "validation sequences per pass, spread evenly over the validation stream (run in micro-batches)");
  b.choice("training.recompute", t.recompute,
           "activation recomputation, the same gradients bit for bit: selective = RMSNorm outputs, SwiGLU "
           "products and MLA's per-head q/k/v are computed again before the backward; full = blocks keep "
           "only their inputs and run their forward again (least memory, a third more compute)");
  b.flag("training.cuda_graph", t.cuda_graph,
         "cuda only: capture each forward and backward pass of a micro-batch as a CUDA graph in the second step "
         "and replay it in the later ones (docs/parallel.md has the layouts it takes)");

  auto& o = c.optimizer;
  b.real("optimizer.lr", o.lr, 0, kInf, true, false, "peak learning rate (AdamW)");
  b.real("optimizer.beta1", o.beta1, 0, 1, false, true, "AdamW beta1");
  b.real("optimizer.beta2", o.beta2, 0, 1, false, true, "AdamW beta2");
  b.real("optimizer.eps", o.eps, 0, kInf, true, false, "AdamW epsilon");
  b.real("optimizer.weight_decay", o.weight_decay, 0, kInf, false, false,
         "decoupled weight decay (not applied to norms and biases)");
  b.choice("optimizer.kind", o.kind,
           "adamw = AdamW for every parameter; muon = Muon for the hidden matrices (attention and MLA projections, "
           "dense, shared and expert FFNs (each expert's own), MTP projections, the router as optimizer.muon.router "
           "says) and AdamW with the keys above for the embedding, the head, norms (docs/optimizer.md)");
  auto& mu = o.muon;
  b.real("optimizer.muon.lr", mu.lr, 0, kInf, true, false, "Muon's peak learning rate (the lr schedule scales it)");
  b.real("optimizer.muon.momentum", mu.momentum, 0, 1, false, true, "Muon's momentum mu: buf = mu buf + (1 - mu) g");
  b.flag("optimizer.muon.nesterov", mu.nesterov, "Nesterov momentum: orthogonalise g + mu (buf - g) instead of buf");
  b.integer("optimizer.muon.ns_steps", mu.ns_steps, 1, 99, "Newton-Schulz iterations");
  b.reals("optimizer.muon.ns_coefficients", {&mu.ns_a, &mu.ns_b, &mu.ns_c},
          "[a, b, c] of the quintic X <- a X + (b A + c A A) X, A = X X^T (Keller Jordan's, torch.optim.Muon's)");
  b.real("optimizer.muon.eps", mu.eps, 0, kInf, true, false, "the iteration divides by max(Frobenius norm, eps)");
  b.real("optimizer.muon.weight_decay", mu.weight_decay, 0, kInf, false, false,
         "decoupled weight decay of Muon's matrices: W <- W - lr wd W");
  b.choice("optimizer.muon.scale", mu.scale,
           "the update's scale for an [A, B] matrix (torch.optim.Muon's adjust_lr_fn): match_rms_adamw = 0.2 "
           "sqrt(max(A, B)) (Moonlight, Kimi K2), original = sqrt(max(1, A / B)) (Keller Jordan)");
  b.choice("optimizer.muon.router", mu.router, "who updates the MoE router's gate matrix");
  auto& qk = o.qk_clip;
  b.flag("optimizer.qk_clip.enabled", qk.enabled,
         "QK-Clip (Kimi K2): after each step rescale the query and key weights of every head whose largest "
         "attention logit of the step exceeds tau (with either optimizer.kind; docs/optimizer.md)");
  b.real("optimizer.qk_clip.tau", qk.tau, 0, kInf, true, false,
         "QK-Clip's threshold on a head's largest pre-softmax logit (after the softmax scale)");

  auto& l = c.lr_schedule;
  b.choice("lr_schedule.kind", l.kind, "decay after warmup");
  b.integer("lr_schedule.warmup_steps", l.warmup_steps, 0, kSteps, "linear warmup steps");
  b.real("lr_schedule.min_lr_ratio", l.min_lr_ratio, 0, 1, false, false, "final lr as a fraction of the peak");
  b.choice("lr_schedule.extend", l.extend,
           "resuming a run whose cosine decay is over with a higher training.steps: constant = hold the final lr "
           "for the added steps; rewarm = warm up again from the final lr to the peak over warmup_steps, then a "
           "second cosine decay to the new training.steps; refuse = stop and name the choices");

  auto& p = c.parallel;
  b.integer("parallel.dp", p.dp, 1, kCount, "data-parallel ranks");
  b.integer("parallel.tp", p.tp, 1, kCount, "tensor-parallel ranks");
  b.integer("parallel.pp", p.pp, 1, kCount, "pipeline-parallel ranks");
  b.integer("parallel.ep", p.ep, 1, kCount, "expert-parallel ranks (among the dp*tp ranks of a stage)");
  b.real_or_word("parallel.ep_receive_bound", p.ep_receive_bound, 1, "worst",
                 "with ep > 1: rows each expert-parallel rank keeps room for in a MoE layer's pass, in multiples of "
                 "the average arrivals (tokens x top_k); \"worst\" = the most that can arrive (ep x tokens x "
                 "min(top_k, experts / ep)), never exceeded. A pass that brings more than a number's room grows the "
                 "arena once, with a warning (docs/parallel.md)");
  b.integer("parallel.vpp", p.vpp, 1, kSmall, "model chunks per pipeline rank (interleaved schedule)");
  b.choice("parallel.schedule", p.schedule, "pipeline schedule");
  b.integer("parallel.zero", p.zero, 0, 3,
            "ZeRO stage: 0 = AdamW moments on every data-parallel rank, 1 = sharded over them, 2 = gradients "
            "sharded too, 3 = weights too (FSDP: gathered per block as passes read them; no pipeline schedule)");
  b.flag("parallel.sequence_parallel", p.sequence_parallel,
         "with tp > 1: each tensor-parallel rank keeps 1/tp of the rows between attention and FFN (norms, residual "
         "adds, stage transfers), gathering them before each and reduce-scattering after (Megatron's sequence "
         "parallelism); the MoE then runs on the rank's own rows");
  b.flag("parallel.share_gpu", p.share_gpu,
         "ranks of a node may share its GPUs (rank i uses GPU i mod count) and communicate through host memory "
         "instead of NCCL, which refuses two ranks on one GPU");
  b.choice("parallel.comm", p.comm,
           "how device payloads move between GPU ranks: auto = NCCL when there are several ranks, each with a GPU "
           "of its own, and every one loads NCCL (else staged, the banner saying why); nccl = NCCL even for one rank "
           "(loaded at run time: libnccl.so.2, or the library MOETRAIN_NCCL_LIBRARY names); staged = through host "
           "memory and MPI");

  auto& pr = c.precision;
  b.choice("precision.device", pr.device,
           "where the step runs (cpu-strict: the CPU with device memory unreadable outside ops, for tests)");
  b.choice("precision.matmul", pr.matmul, "GEMM input precision (fp32 accumulation always; fp8: see [fp8])");
  b.flag("precision.bf16_activations", pr.bf16_activations,
         "with matmul = \"bf16\": keep activations that only GEMMs or attention read (normed inputs, queries, keys, "
         "values, SwiGLU products) in bfloat16: the same products, half their memory");
  b.flag("precision.bf16_outputs", pr.bf16_outputs,
         "with matmul = \"bf16\" and bf16_activations: the GEMMs whose output only SwiGLU reads (the gate and up "
         "of the dense FFN and of the shared and routed experts) write it in bfloat16, rounded once from the fp32 "
         "sums, and SwiGLU reads it so in both passes: half that memory, one rounding more (docs/model.md)");
  b.choice("precision.attention", pr.attention,
           "on a GPU, causal attention with bf16 or fp8 matmuls: auto = cuDNN's fused attention where libcudnn.so.9 "
           "loads (or the file MOETRAIN_CUDNN_LIBRARY names) and it runs the shape, else the own kernels; cudnn = "
           "cuDNN or an error; own = the own kernels, whose backward is bitwise reproducible (docs/ops.md)");
  b.real("precision.peak_tflops", pr.peak_tflops, 0, kInf, false, false,
         "device peak TFLOP/s for MFU (0 = the GPU's dense BF16 peak if known: H100, H800, H200 SXM)");

  auto& f8 = c.fp8;
  b.choice("fp8.formats", f8.formats, "FP8 formats: E4M3 everywhere, or E4M3 forward and E5M2 gradients");
  b.integer("fp8.tile", f8.tile, 1, kCount, "activation and gradient pieces: 1 x tile along the product's K");
  b.integer("fp8.block", f8.block, 1, kCount, "weight pieces: block x block");
  b.choice("fp8.scaling", f8.scaling, "tile: per piece (DeepSeek-V3); tensor: one scale per operand (ablation)");
  b.choice("fp8.scale", f8.scale, "pow2: power-of-two scales (exact division); fp32: amax / max");
  b.integer("fp8.accumulator_bits", f8.accumulator_bits, 0, 23,
            "CPU emulation of the tensor cores' sum: 0 = fp32; else fraction bits kept (Hopper: about 14)");
  b.integer("fp8.promote_every", f8.promote_every, 0, kWidth,
            "with accumulator_bits: products summed before adding into fp32 (0 = never)");
  b.flag("fp8.head", f8.head, "the output head in FP8 too (DeepSeek-V3 keeps it in BF16)");
  b.flag("fp8.router", f8.router, "the MoE router in FP8 too (DeepSeek-V3 keeps it in BF16)");
  b.flag("fp8.fused_codes", f8.fused_codes,
         "RMSNorm, SwiGLU and attention write the FP8 codes of the GEMM inputs they produce (false: the GEMMs "
         "quantize them, the same codes)");

  b.integer("checkpoint.every", c.checkpoint.every, 0, kSteps, "steps between checkpoints (0 = only the final one)");
  b.flag("checkpoint.final", c.checkpoint.final,
         "a checkpoint at the last step and when a signal stops the run; false: only checkpoint.every's and "
         "--stop-after's (benchmarks)");
  b.integer("checkpoint.keep", c.checkpoint.keep, 1, kCount, "newest checkpoints kept");
  b.text("checkpoint.resume", c.checkpoint.resume,
         "\"auto\" (newest complete checkpoint of this run; a damaged one falls back to the one before, with a "
         "warning), \"never\", or a checkpoint directory (a damaged one stops the run)");

  b.integer("log.every", c.log.every, 1, kSteps, "steps between printed step lines");
  b.choice("log.progress", c.log.progress,
           "line: one step line redrawn in place, with ETA; plain: a line per report (files, mpirun); "
           "auto: line when stdout is a terminal outside mpirun");
  return f;
}

}  // namespace mt
