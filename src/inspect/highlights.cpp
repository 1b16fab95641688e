#include "inspect/highlights.hpp"

namespace mt {

namespace {

std::string num(const FlatConfig& c, const std::string& key) { return config_text(c, key, "?"); }

std::string model_line(const FlatConfig& c) {
  const long long layers = config_int(c, "model.n_layers", 0), dense = config_int(c, "model.n_dense_layers", 0);
  std::string attention;
  if (config_text(c, "model.attention.kind", "mha") == "mla") {
    attention = "MLA " + num(c, "model.n_heads") + " heads (qk " + num(c, "model.attention.qk_nope_head_dim") + "+" +
                num(c, "model.attention.qk_rope_head_dim") + ", v " + num(c, "model.attention.v_head_dim") +
                ", kv rank " + num(c, "model.attention.kv_lora_rank") + ", q rank " +
                num(c, "model.attention.q_lora_rank") + ")";
  } else {
    const long long kv = config_int(c, "model.attention.n_kv_heads", 0);
    attention = "MHA " + num(c, "model.n_heads") + " heads x " + num(c, "model.head_dim") + " (" +
                (kv ? std::to_string(kv) : num(c, "model.n_heads")) + " kv heads)";
  }
  std::string line = std::to_string(layers) + " layers (" + std::to_string(dense) + " dense, " +
                     std::to_string(layers - dense) + " MoE), d_model " + num(c, "model.d_model") + ", " + attention;
  if (layers > dense)
    line += ", " + num(c, "model.moe.n_routed_experts") + " routed experts (top " + num(c, "model.moe.top_k") +
            ") + " + num(c, "model.moe.n_shared_experts") + " shared";
  if (config_int(c, "model.mtp.depth", 0) > 0) line += ", MTP depth " + num(c, "model.mtp.depth");
  return line;
}

std::string balance_line(const FlatConfig& c) {
  std::string line;
  if (config_number(c, "model.moe.bias_update_speed", 0) > 0)
    line = "aux-loss-free bias (update speed " + num(c, "model.moe.bias_update_speed") + ")";
  const std::string aux = config_text(c, "model.moe.aux_loss", "none");
  if (aux != "none")
    line += (line.empty() ? "" : " + ") + aux + " balance loss (alpha " + num(c, "model.moe.aux_alpha") + ")";
  return line.empty() ? "none" : line;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> config_highlights(const FlatConfig& c) {
  std::vector<std::pair<std::string, std::string>> out;
  out.emplace_back("model", model_line(c));
  const long long tokens = config_int(c, "training.steps", 0) * config_int(c, "training.global_batch", 0) *
                           config_int(c, "model.seq_len", 0);
  out.emplace_back("training", num(c, "training.steps") + " steps of " + num(c, "training.global_batch") +
                                   " sequences x " + num(c, "model.seq_len") + " tokens (" + std::to_string(tokens) +
                                   " tokens), micro-batch " + num(c, "training.micro_batch"));
  out.emplace_back("optimizer", "AdamW lr " + num(c, "optimizer.lr") + ", " + num(c, "lr_schedule.kind") +
                                    " schedule, warmup " + num(c, "lr_schedule.warmup_steps") +
                                    " steps; weight decay " + num(c, "optimizer.weight_decay") + ", clip " +
                                    num(c, "training.grad_clip"));
  out.emplace_back("precision", num(c, "precision.matmul") + " matmuls, device " + num(c, "precision.device"));
  if (config_int(c, "model.n_layers", 0) > config_int(c, "model.n_dense_layers", 0))
    out.emplace_back("balance", balance_line(c));
  return out;
}

}  // namespace mt
