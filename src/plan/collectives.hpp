#pragma once
// Collectives on a cluster's links: which ranks of a group share a scale-up domain, and how long a
// hierarchical all-reduce takes.
#include "plan/cluster.hpp"

namespace mt::plan {

// A collective among `n` ranks spaced `stride` apart in rank order (tensor-parallel ranks are
// adjacent): how many share a scale-up domain, and how many domains the group spans.
struct Span {
  int per_domain;
  int domains;
};
Span span(const Cluster& c, int n, int stride);

// Hierarchical all-reduce (reduce-scatter inside the domain, all-reduce across domains on each
// rank's 1/per share, all-gather inside): one-direction bytes per rank over each link.
double all_reduce_time(const Cluster& c, double bytes, int n, int stride);

}  // namespace mt::plan
