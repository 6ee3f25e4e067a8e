// results.tsv as upstream autoresearch writes it, from xv's experiments (docs/xvctl.md § results
// --format): one row per finished run, header `commit\tval_bpb\tmemory_gb\tstatus\tdescription`.
//   commit       a code candidate's: the first 7 characters of its train.py's sha256 (issue 16:
//                the source is what upstream's git commit names); else of the run's config hash
//                (the resolved config without the seed: replicates share it), else of its recipe
//                hash, else "0000000";
//   val_bpb      six decimals; 0.000000 for a crash;
//   memory_gb    peak allocated memory / 1024 MB, one decimal; 0.0 for a crash or when unmeasured;
//   status       keep (a kept candidate, or a control: a run of the kept head), crash (diverged,
//                failed, invalid, timed_out, lost, or a success without a finite val_bpb), discard
//                (every other finished run: "not kept", undecided runs included);
//   description  the experiment's name; " seed=S" when the export holds other runs of the same
//                commit and name (replicates, controls of several rounds); " (control)" for a
//                control; " (KIND)" for a crash (the failure kind, else the state, or
//                "no val_bpb").
// Left out: runs not finished (queued, assigned, running), cancelled runs (nothing was measured),
// and reused rows (their figures are another run's, which is listed itself).
// Thread-safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "xv/v1/types.pb.h"

namespace xv::client {

struct ResultsExportRow {
  std::string commit;
  std::string val_bpb;    // "0.997900"
  std::string memory_gb;  // "44.0"
  std::string status;     // keep | discard | crash
  std::string description;
  const v1::Experiment* experiment = nullptr;  // the source row (borrowed from the input)
};

// The rows of the export, in the order of `experiments` (id order from the listing).
std::vector<ResultsExportRow> BuildResultsExport(const std::vector<v1::Experiment>& experiments);

// Upstream's results.tsv, byte for byte: the header line, then one line per row, '\n' endings.
std::string RenderResultsTsv(const std::vector<ResultsExportRow>& rows);

// The same five columns plus id, state and decision, as RFC 4180 CSV ('\n' line endings).
std::string RenderResultsCsv(const std::vector<ResultsExportRow>& rows);

// {"results": [{"commit","val_bpb","memory_gb","status","description","id","state","decision"}]}
// with val_bpb and memory_gb as numbers (0 for a crash, as in the TSV).
nlohmann::json ResultsExportJson(const std::vector<ResultsExportRow>& rows);

}  // namespace xv::client
