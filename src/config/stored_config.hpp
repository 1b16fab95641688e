#pragma once
// A config an older moetrain stored (log.h5, checkpoints) in today's keys, so its runs still
// resume and inspect: training.eval_batches (micro-batches) becomes training.eval_sequences =
// eval_batches * micro_batch, the same number of sequences; a config without data.shuffle was
// trained in file order and gets data.shuffle = false. Text that is not TOML comes back as it is,
// for the caller to report.
#include <string>

namespace mt {

std::string upgrade_stored_config(const std::string& toml_text);

}  // namespace mt
