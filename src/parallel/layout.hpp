#pragma once
// Where each rank of a run sits. World ranks fill tensor-parallel positions first, then data
// parallel ones, then pipeline stages:  rank = tp + TP * (dp + DP * pp),  so a tensor-parallel
// group is the nearest ranks (one node on a real cluster) and a stage is a contiguous block.
// Routed experts spread over ep ranks among the DP*TP ranks of a stage (as in DeepSeek-V3):
// the stage position s = tp + TP * dp gives expert-parallel rank s % EP in group s / EP; ranks
// with the same expert-parallel rank in different groups hold the same experts (replicas).
#include <string>

#include "config/config.hpp"

namespace mt {

struct ParallelLayout {
  int dp = 1, tp = 1, pp = 1, ep = 1;
  // DualPipe: pipeline rank r holds the stages of rank pp-1-r too (the other direction), so the
  // pair sums everything they hold.
  bool mirrored = false;
  // The first and last stages live on pipeline ranks 0 and pp-1 and both hold the embedding
  // (the last for multi-token prediction): the two copies sum their gradients.
  bool tied_embedding = false;
  int world() const { return dp * tp * pp; }
  int stage_ranks() const { return dp * tp; }
};

struct RankCoords {
  int rank = 0, tp = 0, dp = 0, pp = 0;
  int ep = 0, ep_group = 0;  // expert-parallel rank and which replica group of experts
};

// The layout an experiment's [parallel] table describes.
ParallelLayout layout_of(const ParallelConfig& parallel, const ModelConfig& model);
RankCoords coords_of(const ParallelLayout& layout, int rank);
// "dp=2 tp=1 pp=4 ep=2 vpp=1 schedule=dualpipe zero=1": the layout as checkpoints and logs record it.
std::string layout_text(const ParallelConfig& parallel);
// One line per rank: "rank 3: tp 1 dp 1 pp 0 ep 1 (experts 4-7)" (the first 16 of a job of
// more than 64).
std::string placement_text(const ParallelLayout& layout, int n_experts);

}  // namespace mt
