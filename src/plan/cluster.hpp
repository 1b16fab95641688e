#pragma once
// A cluster profile (configs/clusters/*.toml): what one accelerator computes and stores, the
// links between accelerators, and the fractions of peak that real kernels and collectives
// reach. Every number in a shipped profile carries its source in a comment.
#include <string>
#include <vector>

#include "plan/fp8_recipe.hpp"

namespace mt::plan {

struct Accelerator {
  std::string name;
  std::string vendor;        // who makes it (NVIDIA, AMD, Intel, Google)
  double bf16_flops = 0;     // dense peak, FLOP/s
  double fp8_flops = 0;      // dense peak, FLOP/s (equal to bf16_flops where FP8 is not faster)
  double hbm_bytes = 0;
  double hbm_bandwidth = 0;  // bytes/s
};

struct Torus {
  std::vector<int> dims;         // chips along each axis
  double link_bandwidth = 0;     // bytes/s one way, per link
  bool wraparound = true;
};

struct Cluster {
  std::string name;
  std::string path;          // the file it came from, for messages
  int accelerators = 0;      // the whole cluster
  Accelerator accel;
  int domain = 1;                    // accelerators per scale-up domain (NVLink node, NVL72 rack, TPU slice)
  double scale_up_bandwidth = 0;     // bytes/s per accelerator, one direction
  double scale_out_bandwidth = 0;    // bytes/s per accelerator, one direction, between domains
  std::string topology = "switched"; // switched | torus
  Torus torus;
  double matmul_efficiency_bf16 = 0;  // achieved / peak FLOP/s of the model's matrix multiplies, BF16
  double matmul_efficiency_fp8 = 0;   // the same with FP8 matrix multiplies
  double activation_passes = 0;       // HBM traffic of memory-bound ops, in activation sizes per step
  bool attention_materialized = false;  // the software writes the attention score matrix to HBM
  // What the software overlaps with compute: tensor-parallel collectives with the GEMMs beside
  // them; gradient reduction with the last backward and the weight gather with the first
  // forward; in 1F1B schedules, one micro-batch's all-to-alls with another's compute.
  bool overlap_tp = false, overlap_dp = false, overlap_ep = false;
  double comm_sm_share = 0;           // of the compute units, what an all-to-all beside compute takes
  bool fp8_dispatch = false;          // under FP8, tokens travel to their experts in FP8
  Fp8Recipe fp8_recipe = Fp8Recipe::tensor;  // how FP8 values are scaled (software.fp8_recipe, optional)
  double bus_efficiency = 0;           // achieved / nominal bandwidth of collectives
  double memory_usable = 0;            // fraction of HBM a training process can use
  std::string software;                // the software profile applied (plan/software.hpp), if any
  double software_matmul_factor = 1;   // the software profile's factor on both matmul efficiencies

  // Bandwidth per accelerator, one direction, for a collective among `group` accelerators that
  // stays inside one scale-up domain.
  double domain_bandwidth(int group) const;
};

// Throws UserError naming the file, the key and what is valid.
Cluster load_cluster(const std::string& path);

}  // namespace mt::plan
