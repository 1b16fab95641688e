#pragma once
// Which GPU a rank trains on: one GPU per rank, chosen by the rank's place among the ranks that
// mpirun started on the same node. NCCL refuses two ranks on one GPU, and ranks of one node see
// the same GPUs, so the node-local rank is the index.
#include <string>

namespace mt {

struct NodePlace {
  int local_rank = 0;  // this rank's index among the ranks of its node
  int local_size = 1;  // ranks on this node
};

// From OpenMPI's environment (OMPI_COMM_WORLD_LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_SIZE); a process
// started without mpirun is alone on its node.
NodePlace node_place_from_env();

// The GPU index for `place` when the node has `visible_gpus` (CUDA_VISIBLE_DEVICES applied), or -1
// with the reason in *why when the node has fewer GPUs than ranks and `share` is false (with
// `share`, node-local rank i takes GPU i mod visible_gpus). Every rank of the node gets the same
// answer, so either all of them train on GPUs or none does.
int gpu_for_rank(NodePlace place, int visible_gpus, bool share, std::string* why);

}  // namespace mt
