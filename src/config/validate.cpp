#include "config/validate.hpp"

#include <vector>

#include "config/micro_batches.hpp"
#include "pipeline/generators.hpp"
#include "util/error.hpp"

namespace mt {

namespace {
void require(bool ok, const Config& c, const std::string& key, const std::string& message) {
  if (!ok) throw UserError(c.origin.at(key) + ": " + key + " " + message);
}
std::string s(long long v) { return std::to_string(v); }
// The divisors of n in order, the middle of a long list left out (n may be as large as 2^62).
std::string divisors(long long n) {
  std::vector<long long> low, high;
  for (long long d = 1; d <= n / d; ++d)
    if (n % d == 0) {
      low.push_back(d);
      if (d != n / d) high.push_back(n / d);
    }
  low.insert(low.end(), high.rbegin(), high.rend());
  std::string out;
  for (size_t i = 0; i < low.size(); ++i) {
    if (low.size() > 12 && i == 8) {
      out += ", ...";
      i = low.size() - 3;
    }
    out += (out.empty() ? "" : ", ") + std::to_string(low[i]);
  }
  return out;
}

// A pipeline: the schedule must fit the micro-batches each pipeline runs, every stage needs a
// layer, and a global-batch balance loss needs every forward before any backward.
void validate_pipeline(const Config& c) {
  const auto& m = c.model;
  const auto& t = c.training;
  const auto& p = c.parallel;
  const int microbatches = micro_batches_per_rank(t.global_batch, t.micro_batch, p.dp);
  const std::string schedule = name_of(p.schedule);
  const pipeline::ScheduleRequest req{p.schedule, p.pp, microbatches, p.vpp};
  try {
    pipeline::validate_request(req);
  } catch (const UserError& e) {
    throw UserError(c.origin.at("parallel.schedule") + ": parallel.schedule = \"" + schedule + "\": " + e.what() +
                    " (each pipeline runs training.global_batch / (micro_batch * dp) = " + s(microbatches) +
                    " micro-batches per step)");
  }
  // Every stage needs a block: checked before placement_for, whose int stage count would
  // overflow for pp * vpp beyond any model.
  const long long wanted =
      (long long)p.pp * (p.schedule == pipeline::Kind::interleaved ? p.vpp
                         : p.schedule == pipeline::Kind::dualpipev ? 2 : 1);
  require(wanted <= m.n_layers, c, "model.n_layers",
          "= " + s(m.n_layers) + " is fewer than the " + s(wanted) + " pipeline stages of parallel.schedule = \"" +
              schedule + "\" with pp = " + s(p.pp) + (p.vpp > 1 ? " and vpp = " + s(p.vpp) : "") +
              ": every stage needs at least one block");
  require(m.moe.aux_loss != BalanceLoss::global_batch || p.schedule == pipeline::Kind::gpipe, c, "parallel.schedule",
          "= \"" + schedule + "\" runs backward passes before the step's last forward, but model.moe.aux_loss = "
          "\"global_batch\" needs the whole step's routing first: use schedule \"gpipe\" or aux_loss \"micro_batch\"");
}

// The [parallel] table against the model and the batch: what each kind of rank splits must
// split evenly.
void validate_layout(const Config& c) {
  const auto& m = c.model;
  const auto& t = c.training;
  const auto& p = c.parallel;
  // One pipeline rank runs micro-batches one after another ("1f1b" of one stage), or DualPipeV's
  // two half-model chunks, one micro-batch's forward beside another's backward.
  using pipeline::Kind;
  require(p.pp > 1 || p.schedule == Kind::one_f_one_b || p.schedule == Kind::dualpipev, c, "parallel.schedule",
          "= \"" + std::string(name_of(p.schedule)) +
              "\" orders micro-batches over pipeline stages, but parallel.pp = 1 has one stage: use "
              "\"1f1b\" (micro-batches one after another), \"dualpipev\" (two half-model chunks on the rank, "
              "one micro-batch's forward overlapping another's backward), or parallel.pp > 1");
  if (p.pp > 1 || p.schedule == Kind::dualpipev) validate_pipeline(c);
  // The planner refuses the same (layout_problem).
  require(p.zero < 3 || (p.pp == 1 && p.schedule == Kind::one_f_one_b), c, "parallel.zero",
          "= 3 (FSDP) gathers each block's weights for every pass of every micro-batch, and runs without a pipeline "
          "schedule: use parallel.pp = 1 with schedule \"1f1b\", or zero <= 2 with pipelines");
  require(!(p.share_gpu && p.comm == CommChoice::nccl), c, "parallel.comm",
          "= \"nccl\" cannot go with parallel.share_gpu = true: NCCL refuses two ranks on one GPU; set parallel.comm = "
          "\"auto\" (staged through host memory when ranks share a GPU)");
  require(p.vpp == 1 || p.schedule == Kind::interleaved, c, "parallel.vpp",
          "= " + s(p.vpp) + " applies to parallel.schedule = \"interleaved\" only (now \"" + name_of(p.schedule) +
              "\"); set it to 1");
  require(m.n_heads % p.tp == 0, c, "parallel.tp",
          "= " + s(p.tp) + " must divide model.n_heads = " + s(m.n_heads) +
              " (each rank holds whole heads): use one of " + divisors(m.n_heads));
  if (m.attention.kind == AttentionKind::mha) {
    const int kv = m.attention.n_kv_heads == 0 ? m.n_heads : m.attention.n_kv_heads;
    require(kv % p.tp == 0, c, "parallel.tp",
            "= " + s(p.tp) + " must divide the key/value heads = " + s(kv) + ": use one of " + divisors(kv));
  }
  if (m.n_dense_layers > 0)
    require(m.ffn_hidden % p.tp == 0, c, "parallel.tp",
            "= " + s(p.tp) + " must divide model.ffn_hidden = " + s(m.ffn_hidden) +
                " (the dense FFN's hidden units split tp ways)");
  require(!p.sequence_parallel || p.tp > 1, c, "parallel.sequence_parallel",
          "= true splits rows over the tensor-parallel ranks and needs parallel.tp > 1 (now 1): set it to false or "
          "raise parallel.tp");
  if (m.n_layers > m.n_dense_layers || p.sequence_parallel) {
    const long long tokens = (long long)t.micro_batch * m.seq_len;
    require(tokens % p.tp == 0, c, "parallel.tp",
            "= " + s(p.tp) +
                " must divide the tokens of a micro-batch, training.micro_batch * model.seq_len = " + s(tokens) +
                " (the MoE and sequence parallelism split them over the tensor-parallel ranks): use one of " +
                divisors(tokens));
    // Validation runs its sequences in micro-batches, the last holding the remainder.
    const long long last = (long long)(t.eval_sequences % t.micro_batch) * m.seq_len;
    require(t.eval_every == 0 || last % p.tp == 0, c, "training.eval_sequences",
            "= " + s(t.eval_sequences) + " leaves " + s(t.eval_sequences % t.micro_batch) +
                " for the last validation micro-batch, " + s(last) + " tokens, which parallel.tp = " + s(p.tp) +
                " must divide as it does a micro-batch's: use a multiple of training.micro_batch = " +
                s(t.micro_batch));
  }
  const long long dp_tp = (long long)p.dp * p.tp;
  require(dp_tp % p.ep == 0, c, "parallel.ep",
          "= " + s(p.ep) + " must divide parallel.dp * parallel.tp = " + s(dp_tp) +
              " (experts spread over the ranks of a stage): use one of " + divisors(dp_tp));
  require(m.moe.n_routed_experts % p.ep == 0, c, "parallel.ep",
          "= " + s(p.ep) + " must divide model.moe.n_routed_experts = " + s(m.moe.n_routed_experts) +
              " (each rank holds n_routed_experts / ep experts): use one of " + divisors(m.moe.n_routed_experts));
  const long long dp_micro = (long long)p.dp * t.micro_batch;
  require(t.global_batch % dp_micro == 0, c, "training.global_batch",
          "= " + s(t.global_batch) + " must be a multiple of parallel.dp * training.micro_batch = " + s(dp_micro) +
              " (each data-parallel rank runs global_batch / dp sequences in whole micro-batches)");
}

}  // namespace

void validate_config(const Config& c) {
  const auto& m = c.model;
  const auto& e = m.moe;
  const auto& t = c.training;
  const auto& a = m.attention;
  // The name is one folder under run.out_dir: a path in it would write elsewhere or nest runs.
  const std::string& name = c.run.name;
  require(!name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos, c, "run.name",
          "= \"" + name + "\" must name one folder under run.out_dir: not empty, \".\" or \"..\", and without \"/\" " +
              "(put the folder part in run.out_dir)");
  if (a.kind == AttentionKind::mha) {
    require(m.head_dim % 2 == 0, c, "model.head_dim", "= " + s(m.head_dim) + " must be even (RoPE rotates pairs)");
    require(m.d_model % m.n_heads == 0, c, "model.n_heads",
            "= " + s(m.n_heads) + " must divide model.d_model = " + s(m.d_model) +
            " (pick n_heads among the divisors of d_model)");
    const int kv = a.n_kv_heads == 0 ? m.n_heads : a.n_kv_heads;
    require(m.n_heads % kv == 0, c, "model.attention.n_kv_heads",
            "= " + s(kv) + " must divide model.n_heads = " + s(m.n_heads) +
                " (each key/value head serves a group of query heads)");
  } else {
    require(a.qk_rope_head_dim % 2 == 0, c, "model.attention.qk_rope_head_dim",
            "= " + s(a.qk_rope_head_dim) + " must be even (RoPE rotates pairs)");
    require(a.n_kv_heads == 0, c, "model.attention.n_kv_heads",
            "= " + s(a.n_kv_heads) + " applies to mha only; MLA shares its compressed key-value latent, so leave it 0");
  }
  if (m.rope_scaling.kind == RopeScalingKind::yarn)
    require(m.rope_scaling.beta_fast > m.rope_scaling.beta_slow, c, "model.rope_scaling.beta_fast",
            "= " + std::to_string(m.rope_scaling.beta_fast) + " must exceed model.rope_scaling.beta_slow = " +
                std::to_string(m.rope_scaling.beta_slow) + " (the fast end of YaRN's ramp turns more often)");
  require(m.n_dense_layers <= m.n_layers, c, "model.n_dense_layers",
          "= " + s(m.n_dense_layers) + " must be <= model.n_layers = " + s(m.n_layers));
  require(e.top_k <= e.n_routed_experts, c, "model.moe.top_k",
          "= " + s(e.top_k) + " must be <= model.moe.n_routed_experts = " + s(e.n_routed_experts));
  require(e.n_routed_experts % e.n_groups == 0, c, "model.moe.n_groups",
          "= " + s(e.n_groups) + " must divide model.moe.n_routed_experts = " + s(e.n_routed_experts));
  require(e.topk_groups <= e.n_groups, c, "model.moe.topk_groups",
          "= " + s(e.topk_groups) + " must be <= model.moe.n_groups = " + s(e.n_groups));
  const long long allowed = (long long)e.topk_groups * (e.n_routed_experts / e.n_groups);
  require(e.top_k <= allowed, c, "model.moe.top_k",
          "= " + s(e.top_k) + " exceeds the experts in the allowed groups (topk_groups * experts per group = " +
              s(allowed) + ")");
  require(m.mtp.depth < m.seq_len, c, "model.mtp.depth",
          "= " + s(m.mtp.depth) + " must be < model.seq_len = " + s(m.seq_len) +
              " (depth k predicts k+1 tokens ahead)");
  // Token counts are 32-bit inside a step: the rows of a step, and of a micro-batch's routed copies.
  constexpr long long kRows = 2147483647;
  const long long step_tokens = (long long)t.global_batch * m.seq_len;
  require(step_tokens <= kRows, c, "training.global_batch",
          "= " + s(t.global_batch) + " times model.seq_len = " + s(m.seq_len) + " is " + s(step_tokens) +
              " tokens per step, out of range (at most " + s(kRows) + ": token counts are 32-bit)");
  const long long routed_rows = (long long)t.micro_batch * m.seq_len * e.top_k;
  require(routed_rows <= kRows, c, "training.micro_batch",
          "= " + s(t.micro_batch) + " times model.seq_len = " + s(m.seq_len) + " times model.moe.top_k = " +
              s(e.top_k) + " is " + s(routed_rows) + " routed token copies per micro-batch, out of range (at most " +
              s(kRows) + ": row counts are 32-bit)");
  require(t.global_batch % t.micro_batch == 0, c, "training.micro_batch",
          "= " + s(t.micro_batch) + " must divide training.global_batch = " + s(t.global_batch));
  require(c.precision.attention != AttentionChoice::cudnn || c.precision.matmul != MatmulPrecision::fp32, c,
          "precision.attention", "= \"cudnn\" needs bf16 products, but precision.matmul = \"fp32\"; set "
          "precision.matmul = \"bf16\" or \"fp8\", or precision.attention = \"auto\"");
  validate_layout(c);
  validate_cuda_graph(c);
}

}  // namespace mt
