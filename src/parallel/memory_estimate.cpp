#include "parallel/memory_estimate.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <glob.h>
#include <sys/stat.h>

#include "config/precision.hpp"
#include "parallel/layout.hpp"
#include "parallel/storage_model.hpp"
#include "util/error.hpp"
#include "util/format.hpp"

namespace mt {

namespace {

std::string gb(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f GB", bytes / 1e9);
  return text;
}

// A field of /proc/self/status or /proc/meminfo given in kB, in bytes; 0 when absent.
double kib_field(const char* file, const std::string& name) {
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string key;
    double kib = 0;
    if (fields >> key >> kib && key == name) return kib * 1024;
  }
  return 0;
}

int ranks_on_this_host() {
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  const int n = local ? std::atoi(local) : 1;
  return n > 0 ? n : 1;
}

// When the checkpoint's copies are the largest term, the runs that write none avoid them.
std::string checkpoint_advice(const HostMemoryEstimate& e) {
  const MemoryTerm* largest = nullptr;
  for (const MemoryTerm& t : e.terms)
    if (!largest || t.bytes > largest->bytes) largest = &t;
  if (!largest || largest->name.rfind("at a checkpoint", 0) != 0) return "";
  return "; the checkpoint's host copies are the largest term: with checkpoint.final = false and "
         "checkpoint.every = 0 the run writes none";
}

}  // namespace

double HostMemoryEstimate::peak_bytes() const {
  double lasting = 0, transient = 0;
  for (const MemoryTerm& t : terms) {
    if (t.transient) transient = std::max(transient, t.bytes);
    else lasting += t.bytes;
  }
  return ranks_here * (lasting + transient);
}

double HostMemoryEstimate::needed_bytes() const { return peak_bytes() * (1 + kMemoryMargin); }

std::string HostMemoryEstimate::table() const {
  std::string out;
  char line[320];  // the longest term name with its figures
  int transient = 0;
  for (const MemoryTerm& t : terms) {
    std::snprintf(line, sizeof line, "  %10s %s %s\n", gb(t.bytes).c_str(), t.transient ? "*" : " ", t.name.c_str());
    out += line;
    transient += t.transient;
  }
  if (transient > 1) out += "  (* at different times: only the largest counts)\n";
  if (ranks_here > 1) {
    std::snprintf(line, sizeof line, "  x %d ranks on this host (OMPI_COMM_WORLD_LOCAL_SIZE)\n", ranks_here);
    out += line;
  }
  std::snprintf(line, sizeof line, "  %10s   peak\n  %10s   margin of %.0f%% for what the terms do not see\n",
                gb(peak_bytes()).c_str(), gb(needed_bytes() - peak_bytes()).c_str(), 100 * kMemoryMargin);
  out += line;
  std::snprintf(line, sizeof line, "  %10s   needed\n", gb(needed_bytes()).c_str());
  return out + line;
}

RankMemory run_storage(const Config& cfg) {
  Layout l = layout_of_config(cfg);
  l.storage = storage_of(cfg.precision);
  // bf16 GEMM inputs keep a bfloat16 copy of each weight; fp8 its codes in two orientations (the
  // forward's and Dgrad's) and bfloat16 copies of what stays in BF16 (head, router): 2 bytes either way.
  const double prepared = cfg.precision.matmul == MatmulPrecision::fp32 ? 0 : 2;
  return trainer_memory(cfg.model, cfg.training.global_batch, l, prepared);
}

// Under expert parallelism: what the arenas' room for the all-to-all's arrivals costs.
static std::string ep_room_text(const Config& cfg, double headroom) {
  if (cfg.parallel.ep == 1) return "";
  const double bound = cfg.parallel.ep_receive_bound;
  return "; room for expert-parallel arrivals (parallel.ep_receive_bound = " +
         (bound == 0 ? std::string("worst") : format_number("%g", bound)) + "): " + gb(headroom) +
         " over the average's";
}

HostMemoryEstimate estimate_host_memory(const Config& cfg, int slots, double program_bytes, double shard_bytes) {
  const RankMemory m = run_storage(cfg);
  // Without a pipeline schedule, each slot (a micro-batch held until the step's backward) has its
  // own arena; a schedule's arenas are the planner's already.
  const int arenas = layout_of_config(cfg).scheduled() ? 1 : std::max(1, slots);
  HostMemoryEstimate e;
  e.ranks_here = ranks_on_this_host();
  e.terms = {
      {"program: binary, shared libraries, MPI (resident at this check)", program_bytes},
      {"token shards, mapped and read whole (data.train, data.val)", shard_bytes},
      {"weights (fp32, their own master copy) and router biases", m.weights},
      {"gradients (fp32)", m.grads},
      {"AdamW moments (fp32, two per weight)", m.optimizer},
      {"activation arenas: what backward reads, MoE dispatch, logits, per micro-batch in flight (x" +
           std::to_string(arenas) + ")" + ep_room_text(cfg, arenas * m.ep_headroom),
       arenas * m.activations},
  };
  if (m.prepared > 0)
    e.terms.push_back({"weights as the GEMMs read them (bf16 copies or FP8 codes, remade after each update)",
                       m.prepared});
  const ModelConfig& model = cfg.model;
  if (cfg.precision.matmul == MatmulPrecision::bf16) {
    // The CPU's bf16 GEMM rounds copies of both operands for the call; the largest is the head's
    // backward (the logits' gradient [rows, vocab] by the weight [vocab, d_model], rows those of a
    // head chunk) or a dense FFN's.
    const double tokens = double(cfg.training.micro_batch) * model.seq_len;
    const double rows = model.head_chunk_tokens > 0 ? std::min(tokens, double(model.head_chunk_tokens)) : tokens;
    const double head = rows * model.vocab_size + double(model.vocab_size) * model.d_model;
    const double ffn = tokens * model.ffn_hidden + double(model.ffn_hidden) * model.d_model;
    e.terms.push_back({"during a step: the bf16 GEMM's rounded copies of the largest GEMM's operands",
                       4 * std::max(head, ffn), true});
  }
  // The export reads each moment into a host copy of its own before assembling the full one it
  // returns; under ZeRO it gathers every rank's pieces too.
  const CheckpointConfig& c = cfg.checkpoint;
  const bool gathers = cfg.parallel.zero >= 1 && cfg.parallel.dp > 1;
  if (c.final || (c.every > 0 && c.every <= cfg.training.steps))
    e.terms.push_back({std::string("at a checkpoint: host copies of the weights and moments, one moment read first") +
                           (gathers ? ", every rank's pieces" : ""),
                       m.weights + m.optimizer * 1.5 + (gathers ? m.weights : 0), true});
  return e;
}

double resident_bytes_now() { return kib_field("/proc/self/status", "VmRSS:"); }

double resident_high_water_bytes() { return kib_field("/proc/self/status", "VmHWM:"); }

double files_bytes(const std::string& pattern) {
  double total = 0;
  glob_t g{};
  if (::glob(pattern.c_str(), 0, nullptr, &g) == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i) {
      struct stat st{};
      if (::stat(g.gl_pathv[i], &st) == 0) total += double(st.st_size);
    }
  globfree(&g);
  return total;
}

double available_host_bytes() {
  if (const char* set = std::getenv("MOETRAIN_MEMORY_AVAILABLE")) {
    char* end = nullptr;
    const double bytes = std::strtod(set, &end);
    if (end == set || *end != '\0' || !(bytes > 0))
      throw UserError(std::string("MOETRAIN_MEMORY_AVAILABLE = '") + set +
                      "': expected the bytes this run may use, a positive number such as 8e9");
    return bytes;
  }
  return kib_field("/proc/meminfo", "MemAvailable:");
}

double check_host_memory(const Config& cfg, int slots) {
  const double available = available_host_bytes();
  const HostMemoryEstimate e =
      estimate_host_memory(cfg, slots, resident_bytes_now(), files_bytes(cfg.data.train) + files_bytes(cfg.data.val));
  if (available <= 0 || e.needed_bytes() <= available) return e.peak_bytes() / e.ranks_here;
  const ModelConfig& m = cfg.model;
  const char* source = std::getenv("MOETRAIN_MEMORY_AVAILABLE") ? "MOETRAIN_MEMORY_AVAILABLE"
                                                                 : "MemAvailable in /proc/meminfo";
  throw UserError(cfg.source_path + ": this run needs about " + gb(e.needed_bytes()) + " of host memory but " +
                  gb(available) + " is available (" + source + "), so the kernel would kill it part way:\n" +
                  e.table() + "make the model smaller (model.d_model = " + std::to_string(m.d_model) +
                  ", model.n_layers = " + std::to_string(m.n_layers) + "), lower training.micro_batch (" +
                  std::to_string(cfg.training.micro_batch) + "; the arenas grow with it), set training.recompute = "
                  "\"full\", or split the model over more ranks on more hosts (parallel.tp, parallel.pp, parallel.ep)" +
                  checkpoint_advice(e));
}

}  // namespace mt
