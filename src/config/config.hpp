#pragma once
// The typed experiment configuration. Every field here has an entry in the schema
// (schema.cpp) with its TOML key, its valid range and a one-line description; defaults are the
// member initialisers below and describe configs/tiny.toml.
#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "util/names.hpp"
#include "pipeline/kind.hpp"

namespace mt {

// What the blocks keep between forward and backward (training.recompute): everything; all but
// the cheap, wide tensors, computed again before the backward; or only their inputs.
enum class Recompute { none, selective, full };
template <>
struct Names<Recompute> {
  static constexpr std::array<std::pair<const char*, Recompute>, 3> list{
      {{"none", Recompute::none}, {"selective", Recompute::selective}, {"full", Recompute::full}}};
};

// How GPU ranks move device payloads (parallel.comm).
enum class CommChoice { automatic, nccl, staged };
template <>
struct Names<CommChoice> {
  static constexpr std::array<std::pair<const char*, CommChoice>, 3> list{
      {{"auto", CommChoice::automatic}, {"nccl", CommChoice::nccl}, {"staged", CommChoice::staged}}};
};

enum class BalanceLoss { none, sequence, micro_batch, global_batch };
template <>
struct Names<BalanceLoss> {
  static constexpr std::array<std::pair<const char*, BalanceLoss>, 4> list{
      {{"none", BalanceLoss::none}, {"sequence", BalanceLoss::sequence}, {"micro_batch", BalanceLoss::micro_batch},
       {"global_batch", BalanceLoss::global_batch}}};
};

enum class DeviceKind { automatic, cpu, cuda, cpu_strict };
template <>
struct Names<DeviceKind> {
  static constexpr std::array<std::pair<const char*, DeviceKind>, 4> list{
      {{"auto", DeviceKind::automatic}, {"cpu", DeviceKind::cpu}, {"cuda", DeviceKind::cuda},
       {"cpu-strict", DeviceKind::cpu_strict}}};
};

enum class MatmulPrecision { fp32, bf16, fp8 };
template <>
struct Names<MatmulPrecision> {
  static constexpr std::array<std::pair<const char*, MatmulPrecision>, 3> list{
      {{"fp32", MatmulPrecision::fp32}, {"bf16", MatmulPrecision::bf16}, {"fp8", MatmulPrecision::fp8}}};
};

// Which implementation runs causal attention with bf16 products on a GPU (docs/ops.md#attention-on-cudnn).
enum class AttentionChoice { automatic, cudnn, own };
template <>
struct Names<AttentionChoice> {
  static constexpr std::array<std::pair<const char*, AttentionChoice>, 3> list{
      {{"auto", AttentionChoice::automatic}, {"cudnn", AttentionChoice::cudnn}, {"own", AttentionChoice::own}}};
};

// FP8 formats: E4M3 for every operand (DeepSeek-V3), or E4M3 forward with E5M2 gradients.
enum class Fp8Formats { e4m3, e4m3_e5m2 };
template <>
struct Names<Fp8Formats> {
  static constexpr std::array<std::pair<const char*, Fp8Formats>, 2> list{
      {{"e4m3", Fp8Formats::e4m3}, {"e4m3_e5m2", Fp8Formats::e4m3_e5m2}}};
};
enum class Fp8Scaling { tile, tensor };
template <>
struct Names<Fp8Scaling> {
  static constexpr std::array<std::pair<const char*, Fp8Scaling>, 2> list{
      {{"tile", Fp8Scaling::tile}, {"tensor", Fp8Scaling::tensor}}};
};
enum class Fp8Scale { pow2, fp32 };
template <>
struct Names<Fp8Scale> {
  static constexpr std::array<std::pair<const char*, Fp8Scale>, 2> list{
      {{"pow2", Fp8Scale::pow2}, {"fp32", Fp8Scale::fp32}}};
};

// How step lines print: "line" redraws one line in place (a terminal), "plain" prints each as its
// own line (files, pipes, mpirun); "auto" picks by whether stdout is a terminal.
enum class ProgressMode { automatic, line, plain };
template <>
struct Names<ProgressMode> {
  static constexpr std::array<std::pair<const char*, ProgressMode>, 3> list{
      {{"auto", ProgressMode::automatic}, {"line", ProgressMode::line}, {"plain", ProgressMode::plain}}};
};

// Attention of every block (model.attention.kind): multi-head (with grouped-query key/value heads), or
// DeepSeek's multi-head latent attention.
enum class AttentionKind { mha, mla };
template <>
struct Names<AttentionKind> {
  static constexpr std::array<std::pair<const char*, AttentionKind>, 2> list{
      {{"mha", AttentionKind::mha}, {"mla", AttentionKind::mla}}};
};

enum class RopeScalingKind { none, yarn };
template <>
struct Names<RopeScalingKind> {
  static constexpr std::array<std::pair<const char*, RopeScalingKind>, 2> list{
      {{"none", RopeScalingKind::none}, {"yarn", RopeScalingKind::yarn}}};
};

// The learning rate after warmup (lr_schedule.kind).
enum class LrScheduleKind { cosine, constant };
template <>
struct Names<LrScheduleKind> {
  static constexpr std::array<std::pair<const char*, LrScheduleKind>, 2> list{
      {{"cosine", LrScheduleKind::cosine}, {"constant", LrScheduleKind::constant}}};
};

// A resumed run whose cosine decay is over, trained to a higher training.steps (lr_schedule.extend).
enum class LrExtend { constant, rewarm, refuse };
template <>
struct Names<LrExtend> {
  static constexpr std::array<std::pair<const char*, LrExtend>, 3> list{
      {{"constant", LrExtend::constant}, {"rewarm", LrExtend::rewarm}, {"refuse", LrExtend::refuse}}};
};

struct RunConfig {
  std::string name = "tiny";
  std::string out_dir = "runs";
  int64_t seed = 1234;
};

struct MoeConfig {
  int n_routed_experts = 8;
  int n_shared_experts = 1;
  int top_k = 2;
  int expert_hidden = 128;
  double route_scale = 1.0;
  int n_groups = 1;          // group-limited routing: experts split into n_groups groups
  int topk_groups = 1;       // tokens route only into the best topk_groups groups
  double bias_update_speed = 0.001;  // gamma of auxiliary-loss-free balancing (0 = off)
  BalanceLoss aux_loss = BalanceLoss::none;  // the group a balance loss is taken over
  double aux_alpha = 0.0001;         // its weight alpha
};

struct AttentionConfig {
  AttentionKind kind = AttentionKind::mha;
  int n_kv_heads = 0;        // mha: key/value heads for grouped-query attention (0 = n_heads)
  int q_lora_rank = 0;       // mla: query compression rank (0 = a plain query projection)
  int kv_lora_rank = 64;     // mla: key-value compression rank
  int qk_nope_head_dim = 32; // mla: per-head query/key features without position
  int qk_rope_head_dim = 16; // mla: decoupled RoPE features (key part shared by all heads)
  int v_head_dim = 32;       // mla: per-head value features
};

// RoPE scaling for contexts beyond the trained one: none, or YaRN as DeepSeek-V3 configures it (the
// `rope_scaling` of its Hugging Face config): ops/rope/math.hpp's RopeScaling from factor,
// original_seq_len and the betas; cos and sin times m(mscale) / m(mscale_all_dim), and the
// attention scale times m(mscale_all_dim)^2, with m(x) = 0.1 x ln(factor) + 1.
struct RopeScalingConfig {
  RopeScalingKind kind = RopeScalingKind::none;
  double factor = 1.0;
  int original_seq_len = 4096;
  double beta_fast = 32.0, beta_slow = 1.0;
  double mscale = 1.0, mscale_all_dim = 1.0;
};

struct MtpConfig {
  int depth = 0;        // D: extra tokens predicted (0 = no multi-token prediction)
  double weight = 0.3;  // lambda: the MTP loss enters the objective as lambda/D sum_k L_k
};

struct ModelConfig {
  int vocab_size = 257;
  int d_model = 128;
  int n_layers = 4;
  int n_dense_layers = 1;
  int n_heads = 4;
  int head_dim = 32;
  int ffn_hidden = 384;
  int seq_len = 128;
  double rope_theta = 10000.0;
  double norm_eps = 1e-6;
  double init_std = 0.02;
  AttentionConfig attention;
  RopeScalingConfig rope_scaling;
  MoeConfig moe;
  MtpConfig mtp;
  // Rows of the output head's logits that exist at once (model/head_loss.hpp); 0: every row of
  // a micro-batch, the head's gradients then taken in the backward passes.
  int head_chunk_tokens = 4096;
};

struct DataConfig {
  std::string train = "data/fortunes/train_*.bin";
  std::string val = "data/fortunes/val_*.bin";
  bool shuffle = true;  // training windows in a per-epoch random order keyed by run.seed
};

struct TrainingConfig {
  int steps = 300;
  int global_batch = 16;  // sequences per optimizer step
  int micro_batch = 8;    // sequences per forward/backward
  double grad_clip = 1.0; // 0 = no clipping
  int eval_every = 50;    // 0 = no evaluation
  int eval_sequences = 32;  // validation windows, spread evenly over the validation stream
  Recompute recompute = Recompute::none;
  bool cuda_graph = false;  // replay each pass of a micro-batch as a CUDA graph after a warm-up step
};

// Which optimizer updates the hidden matrices (optimizer.kind); AdamW always updates the rest.
enum class OptimizerKind { adamw, muon };
template <>
struct Names<OptimizerKind> {
  static constexpr std::array<std::pair<const char*, OptimizerKind>, 2> list{
      {{"adamw", OptimizerKind::adamw}, {"muon", OptimizerKind::muon}}};
};

// Muon's update scale for an [A, B] matrix (torch.optim.Muon's adjust_lr_fn): original = sqrt(max(1, A / B)),
// match_rms_adamw = 0.2 sqrt(max(A, B)) (Moonlight: the update's RMS of AdamW's, so AdamW's lr carries over).
enum class MuonScale { original, match_rms_adamw };
template <>
struct Names<MuonScale> {
  static constexpr std::array<std::pair<const char*, MuonScale>, 2> list{
      {{"original", MuonScale::original}, {"match_rms_adamw", MuonScale::match_rms_adamw}}};
};

// Who updates the MoE router's gate, a hidden [experts, d_model] matrix (optimizer.muon.router).
enum class RouterOptimizer { muon, adamw };
template <>
struct Names<RouterOptimizer> {
  static constexpr std::array<std::pair<const char*, RouterOptimizer>, 2> list{
      {{"muon", RouterOptimizer::muon}, {"adamw", RouterOptimizer::adamw}}};
};

struct MuonConfig {
  double lr = 3e-3;  // peak; follows the lr schedule as optimizer.lr does
  double momentum = 0.95;
  bool nesterov = true;
  int ns_steps = 5;
  double ns_a = 3.4445, ns_b = -4.7750, ns_c = 2.0315;  // the quintic's coefficients
  double eps = 1e-7;   // the Frobenius norm the iteration divides by is at least this
  double weight_decay = 0.1;
  MuonScale scale = MuonScale::match_rms_adamw;
  RouterOptimizer router = RouterOptimizer::muon;
};

// QK-Clip (Kimi K2 report, arXiv 2507.20534, §2.1): after each step, every attention head whose largest
// pre-softmax logit S_max of the step exceeds tau has its query and key weights rescaled by tau / S_max
// (train/qk_clip.hpp says which rows).
struct QkClipConfig {
  bool enabled = false;
  double tau = 100;  // K2's threshold
};

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::adamw;
  double lr = 3e-3;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;
  MuonConfig muon;
  QkClipConfig qk_clip;
};

struct LrScheduleConfig {
  LrScheduleKind kind = LrScheduleKind::cosine;
  int warmup_steps = 20;
  double min_lr_ratio = 0.1;
  LrExtend extend = LrExtend::constant;
};

struct ParallelConfig {
  int dp = 1, tp = 1, pp = 1, ep = 1;
  double ep_receive_bound = 0;    // rows an ep rank reserves, in average arrivals; 0 = "worst"
  int vpp = 1;                    // model chunks per pipeline rank (interleaved)
  pipeline::Kind schedule = pipeline::Kind::one_f_one_b;
  int zero = 0;                   // 0: replicated AdamW moments; 1: sharded over dp
  bool sequence_parallel = false;  // with tp > 1: rows between tensor-parallel regions split tp ways
  bool share_gpu = false;         // ranks of a node share its GPUs and talk through host memory
  CommChoice comm = CommChoice::automatic;
};

struct PrecisionConfig {
  DeviceKind device = DeviceKind::automatic;
  MatmulPrecision matmul = MatmulPrecision::fp32;  // bf16: bf16 inputs, fp32 accumulation
  double peak_tflops = 0.0;     // device peak for MFU; 0 = look up the device, else unknown
  bool bf16_activations = true;  // with matmul = bf16: activations only GEMMs read kept in bfloat16
  bool bf16_outputs = true;      // with bf16_activations: GEMM outputs only SwiGLU reads written in bfloat16
  AttentionChoice attention = AttentionChoice::automatic;  // on a GPU: cuDNN's fused attention or the own kernels
};

// precision.matmul = "fp8": DeepSeek-V3's recipe (report section 3.3) and its ablations.
struct Fp8Config {
  Fp8Formats formats = Fp8Formats::e4m3;
  int tile = 128;                  // activation and gradient pieces: 1 x tile along K
  int block = 128;                 // weight pieces: block x block
  Fp8Scaling scaling = Fp8Scaling::tile;
  Fp8Scale scale = Fp8Scale::pow2;
  int accumulator_bits = 0;        // CPU emulation: 0 = fp32 sums; else the partial sum's fraction bits
  int promote_every = 128;         // ... added into fp32 every this many products (0 = never)
  bool head = false;               // the output head in FP8 too (the report keeps it in BF16)
  bool router = false;             // the MoE router in FP8 too (likewise)
  bool fused_codes = true;         // RMSNorm and SwiGLU write the FP8 codes of the GEMM inputs they produce
};

struct CheckpointConfig {
  int every = 100;              // 0 = only the final one
  bool final = true;            // one at the end of training and when a signal stops the run
  int keep = 2;                 // newest checkpoints kept on disk
  std::string resume = "auto";  // auto | never | path of a step directory
};

struct LogConfig {
  int every = 10;  // print a step line every N steps (all steps go to log.h5)
  ProgressMode progress = ProgressMode::automatic;
};

struct Config {
  RunConfig run;
  ModelConfig model;
  DataConfig data;
  TrainingConfig training;
  OptimizerConfig optimizer;
  LrScheduleConfig lr_schedule;
  ParallelConfig parallel;
  PrecisionConfig precision;
  Fp8Config fp8;
  CheckpointConfig checkpoint;
  LogConfig log;

  std::string source_path;     // the experiment file
  std::string resolved_toml;   // every key with its effective value, as TOML
  std::map<std::string, std::string> origin;  // key -> "file:line:col" or "--set k=v" or "default"
};

// Reads `path`, applies `--set key=value` overrides in order, checks every key, type, range and
// cross-field rule. Throws UserError naming the file/position, the key and what would be valid.
Config load_config(const std::string& path, const std::vector<std::string>& overrides = {});
// Same, from TOML text (tests); `source_name` stands in for the file name in messages.
Config parse_config(const std::string& toml_text, const std::string& source_name,
                    const std::vector<std::string>& overrides = {});

}  // namespace mt
