// RunPrepare: the work of `xvctl prepare` (docs/data.md): list and read the corpus, shuffle the
// documents (seeded) and split off the validation documents, train the BPE on the training
// documents (TrainBpe: character budget and document cap as upstream), write the tokenizer files,
// encode every document with BOS prepended on several threads, write the train shards and the
// pinned val shard, and finally prepare.json. Idempotent: when prepare.json matches the inputs
// (path, size, mtime) and options and every output verifies, nothing is done and result->up_to_date
// is true (unless options.force). Atomic: everything is built in DIR/.prepare-staging-XXXXXX and
// moved into place only when complete (prepare.json last); on failure the staging directory is
// removed and an existing output is left as it was. Thread-safety: uses its own threads; do not run
// two RunPrepare on the same out_dir at once.
#pragma once

#include "common/status.h"
#include "tokenizer/prepare_options.h"

namespace xv::tok {

// Errors: bad options (INVALID_ARGUMENT naming the flag), input errors (corpus_reader.h: the file
// and byte offset), tokenizer-training errors, I/O errors naming the path. `result` may be null.
Status RunPrepare(const PrepareOptions& options, PrepareResult* result = nullptr);

}  // namespace xv::tok
