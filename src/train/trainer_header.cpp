// The banner of a run and the texts it shares with the log.
#include <algorithm>
#include <cstdio>

#include "io/bpe.hpp"
#include "io/shards.hpp"
#include "model/flops.hpp"
#include "parallel/stages.hpp"
#include "train/step.hpp"
#include "train/trainer.hpp"

namespace mt {

void Trainer::print_header() const {
  const auto& m = cfg_.model;
  std::printf("moetrain: run %s -> %s\n", cfg_.run.name.c_str(), run_dir_.c_str());
  // One line for ranks that all run on the same kind of device, else one per rank (each its own GPU).
  const auto same = [&](const std::string& d) { return d == rank_devices_[0]; };
  if (std::all_of(rank_devices_.begin(), rank_devices_.end(), same)) {
    const std::string who = rank_devices_.size() > 1 ? "all " + std::to_string(rank_devices_.size()) + " ranks: " : "";
    std::printf("  device   %s%s\n", who.c_str(), device_.description.c_str());
  } else {
    for (size_t r = 0; r < rank_devices_.size(); ++r)
      std::printf("  %s rank %3zu: %s\n", r == 0 ? "device  " : "        ", r, rank_devices_[r].c_str());
  }
  if (transport_.transport == DeviceTransport::nccl)
    std::printf("  comm     NCCL between the GPUs, MPI for counts and scalars\n");
  else if (groups_.layout.world() > 1) {
    const std::string why = transport_.no_nccl.empty() ? "" : " (auto: " + transport_.no_nccl + ")";
    std::printf("  comm     MPI; device payloads %s%s\n",
                device_.backend.host_addressable() ? "handed to it in place (CPU memory)"
                                                   : "staged through host memory",
                why.c_str());
  }
  if (cfg_.training.cuda_graph)
    std::printf("  graphs   each pass of a micro-batch%s, captured in the second step and replayed after\n",
                update_graph() ? " and the update (gradient sums, clipping, AdamW, bias update, prepared weights)"
                               : "; not the update: its gradient sums over the ranks would run again at each "
                                 "replay");
  if (groups_.layout.world() > 1 || pipelined(schedule_)) {
    std::printf("  layout   %s: each data-parallel rank runs %d micro-batches of each step\n", layout_.c_str(),
                plan_.micro_batches);
    if (groups_.layout.world() > 1) std::printf("%s", placement_text(groups_.layout, m.moe.n_routed_experts).c_str());
  }
  if (pipelined(schedule_)) {
    // The cut by FLOPs (pipeline_cut): a stage's layers, the last with the head (and MTP).
    const std::vector<int> cut = pipeline_cut(m, schedule_.placement.stages);
    std::string stages;
    for (size_t s = 0; s + 1 < cut.size(); ++s)
      stages += (s ? ", " : "") + std::to_string(cut[s + 1] - cut[s]);
    std::printf("  stages   %zu, of %s layers (the last also the head%s)\n", cut.size() - 1, stages.c_str(),
                m.mtp.depth > 0 ? " and MTP" : "");
  }
  const auto& a = m.attention;
  char attention[96];
  if (a.kind == AttentionKind::mla)
    std::snprintf(attention, sizeof attention, "MLA %d heads (qk %d+%d, v %d, kv rank %d, q rank %d)", m.n_heads,
                  a.qk_nope_head_dim, a.qk_rope_head_dim, a.v_head_dim, a.kv_lora_rank, a.q_lora_rank);
  else
    std::snprintf(attention, sizeof attention, "MHA %d heads x %d (%d kv heads)", m.n_heads, m.head_dim,
                  a.n_kv_heads ? a.n_kv_heads : m.n_heads);
  std::printf("  model    %d layers (%d dense, %d MoE), d_model %d, %s, %d routed experts (top %d) + %d shared\n",
              m.n_layers, m.n_dense_layers, m.n_layers - m.n_dense_layers, m.d_model, attention,
              m.moe.n_routed_experts, m.moe.top_k, m.moe.n_shared_experts);
  std::printf("  params   %.3fM total, %.3fM active per token; %.2f MFLOP per token (training)\n",
              total_params(m) / 1e6, active_matmul_params(m) / 1e6, training_flops_per_token(m) / 1e6);
  std::printf("  data     %zu train tokens (%zu files), %zu val tokens; unigram entropy %.3f nats\n",
              train_data_->size(), train_data_->files().size(), val_data_->size(), train_data_->unigram_entropy());
  std::printf("           %s; validation: %d sequences spread over its stream\n", data_order_text().c_str(),
              cfg_.training.eval_sequences);
  std::printf("  batch    %d sequences x %d tokens per step, %d micro-batches of %d\n", cfg_.training.global_batch,
              m.seq_len, cfg_.training.global_batch / cfg_.training.micro_batch, cfg_.training.micro_batch);
}

// "shuffled by sequence (run.seed 1234); 300 steps read 614k tokens, 0.25 of an epoch".
std::string Trainer::data_order_text() const {
  const auto& t = cfg_.training;
  const double sequences = double(t.steps) * t.global_batch, tokens = sequences * cfg_.model.seq_len;
  char amount[96];
  if (tokens >= 1e9) std::snprintf(amount, sizeof amount, "%.3gG", tokens / 1e9);
  else if (tokens >= 1e6) std::snprintf(amount, sizeof amount, "%.3gM", tokens / 1e6);
  else if (tokens >= 1e4) std::snprintf(amount, sizeof amount, "%.3gk", tokens / 1e3);
  else std::snprintf(amount, sizeof amount, "%.0f", tokens);
  const std::string order = cfg_.data.shuffle ? "shuffled by sequence (run.seed " + std::to_string(cfg_.run.seed) + ")"
                                              : "in file order";
  char line[256];
  std::snprintf(line, sizeof line, "%s; %d steps read %s tokens, %.3g of an epoch", order.c_str(), t.steps, amount,
                sequences / double(train_batches_->windows()));
  return line;
}

// The bytes of text the evaluation's target tokens stand for, per token: an eval loss in bits per
// byte compares runs of any tokenizer.
double Trainer::evaluation_bytes_per_token() const {
  const std::vector<size_t> bytes = token_bytes_of_shards(val_data_->files().front(), cfg_.model.vocab_size);
  std::vector<int> in, tg;
  double total = 0, tokens = 0;
  const int n = cfg_.training.eval_sequences;
  for (int first = 0; first < n; first += cfg_.training.micro_batch) {
    val_batches_->fill_spread(first, std::min(cfg_.training.micro_batch, n - first), n, in, tg);
    for (int t : tg)
      if (t >= 0) total += double(bytes[size_t(t)]), tokens += 1;
  }
  return tokens > 0 ? total / tokens : 0;
}

}  // namespace mt
