"""The Python side of prepare_parity_test.cc: runs python/xv_autoresearch/prepare.py (imported as
`prepare`, first on PYTHONPATH, as xv-worker runs a fork) on XV_DATA_DIR and prints JSON.

    prepare_parity.py meta
        {"vocab_size", "bos_id", "metric_version", "max_seq_len", "time_budget", "eval_tokens",
         "eval_seq_len", "token_bytes_sum", "decoded"}
    prepare_parity.py rows SPLIT B T BATCHES BUFFER_SIZE
        {"rows": [[...T+1 ids...] per row of every batch], "epochs": [epoch per batch]}
        (rows rebuilt from make_dataloader's inputs and targets: inputs + the last target)
    prepare_parity.py bpb TABLE_FILE VOCAB BATCH_SIZE
        {"val_bpb"}: evaluate_bpb of a bigram model whose logits are rows of the float64 table
        (VOCAB x VOCAB, little-endian) at each input id
"""

import json
import sys

import numpy as np
import torch
import torch.nn.functional as F

import prepare


class BigramTable(torch.nn.Module):
    def __init__(self, table):
        super().__init__()
        self.table = torch.nn.Parameter(table, requires_grad=False)

    def forward(self, x, y, reduction="mean"):
        logits = self.table[x]
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), y.view(-1), reduction=reduction)


def main(argv):
    mode = argv[1]
    tokenizer = prepare.Tokenizer.from_directory()
    if mode == "meta":
        print(json.dumps({
            "vocab_size": tokenizer.get_vocab_size(),
            "bos_id": tokenizer.get_bos_token_id(),
            "metric_version": prepare.METRIC_VERSION,
            "max_seq_len": prepare.MAX_SEQ_LEN,
            "time_budget": prepare.TIME_BUDGET,
            "eval_tokens": prepare.EVAL_TOKENS,
            "eval_seq_len": prepare.EVAL_SEQ_LEN,
            "token_bytes_sum": int(prepare.get_token_bytes().sum()),
            "decoded": tokenizer.decode([104, 105, 33]),
        }))
    elif mode == "rows":
        split, B, T, batches, buffer_size = argv[2], int(argv[3]), int(argv[4]), int(argv[5]), \
            int(argv[6])
        loader = prepare.make_dataloader(tokenizer, B, T, split, buffer_size=buffer_size,
                                         device="cpu")
        rows, epochs = [], []
        for _ in range(batches):
            x, y, epoch = next(loader)
            assert x.dtype == torch.long and x.shape == (B, T) and y.shape == (B, T)
            assert torch.equal(x[:, 1:], y[:, :-1]), "targets are not the inputs shifted by one"
            full = torch.cat([x, y[:, -1:]], dim=1)
            rows.extend(full.tolist())
            epochs.append(epoch)
        print(json.dumps({"rows": rows, "epochs": epochs}))
    elif mode == "bpb":
        vocab, batch_size = int(argv[3]), int(argv[4])
        table = torch.from_numpy(np.fromfile(argv[2], dtype="<f8").reshape(vocab, vocab))
        model = BigramTable(table)
        print(json.dumps({"val_bpb": prepare.evaluate_bpb(model, tokenizer, batch_size)}))
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main(sys.argv)
