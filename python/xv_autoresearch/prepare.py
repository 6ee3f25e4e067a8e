"""xv's `prepare` module for autoresearch forks (docs/autoresearch.md).

An upstream karpathy/autoresearch `train.py`, or a fork of it, starts with

    from prepare import MAX_SEQ_LEN, TIME_BUDGET, Tokenizer, make_dataloader, evaluate_bpb

Upstream's prepare.py reads parquet shards and a pickled tokenizer from ~/.cache/autoresearch. This
file has the same names and signatures but reads an xv data directory (`xvctl prepare`, docs/data.md)
and the experiment's budget, so that a fork runs under xv-worker unmodified: the worker puts this
file's folder first on PYTHONPATH and sets

    XV_DATA_DIR        the data directory (tokenizer/, shards/train-NNNNN.xvt, shards/val-00000.xvt)
    XV_SEQUENCE_LEN    EVAL_SEQ_LEN, the context length evaluate_bpb uses (default 2048); a
                       campaign pins it with eval_tokens so val_bpb means one thing across its
                       candidates
    XV_TRAIN_SEQUENCE_LEN  MAX_SEQ_LEN, the training context length; unset or 0: XV_SEQUENCE_LEN.
                       Upstream's train.py trains at and builds its model for MAX_SEQ_LEN, so a
                       fork trains at the recipe's train_sequence_len and is evaluated at its
                       sequence_len without an edit
    XV_TIME_BUDGET_S   TIME_BUDGET, the training budget in seconds (default 300)
    XV_EVAL_TOKENS     EVAL_TOKENS, validation tokens of the final val_bpb (default 40 * 524288)
    XV_DEVICE          cuda | cpu: where make_dataloader puts its batches (default: cuda when
                       torch sees one)

What it reproduces, and how it is checked (tests/unit/python/prepare_parity_test.cc):
  - make_dataloader: upstream's BOS-aligned best-fit packing, with xv-train's document order (the
    split's shards in order, cycled; documents pre-tokenized by `xvctl prepare`; refills of 128
    documents, upstream's tokenizer batch, until the buffer holds buffer_size). Its rows equal
    xv-train's loader rows (trainer/data/best_fit_packer.h) on the same data directory.
  - evaluate_bpb: val_bpb under METRIC_VERSION "bpb-raw-bytes-v2", the definition xv-train stores
    (trainer/eval/bpb_evaluator.h): summed per-token cross-entropy in nats over the targets with a
    raw byte length > 0, divided by ln 2 times the summed raw byte lengths of the targets (specials
    0). "Raw" means the token's own bytes in the BPE ranks. This is NOT upstream's figure:
    upstream counts each token decoded to text, where a cut or invalid UTF-8 piece decodes to
    U+FFFD (3 bytes), never fewer bytes than the raw count, so on the same model xv's val_bpb is
    never below upstream's (equal when every token is whole UTF-8 text).
  - Tokenizer: get_vocab_size, get_bos_token_id and decode need nothing but this file; encode needs
    tiktoken (it raises ImportError naming it otherwise). Training never encodes: the shards hold
    token ids.

Only numpy and torch are imported besides the standard library.
"""

import base64
import json
import math
import os
import struct
import zlib
from bisect import bisect_right, insort
from collections import deque

import numpy as np
import torch

# ---------------------------------------------------------------------------
# Constants: upstream's names, the experiment's values
# ---------------------------------------------------------------------------

METRIC_VERSION = "bpb-raw-bytes-v2"


def _env_int(name, default, zero_means=None):
    """A positive integer from the environment; with `zero_means`, 0 (or unset) gives that."""
    text = os.environ.get(name, "")
    if text == "":
        return default if zero_means is None else zero_means
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{name}: expected a number, got {text!r}") from None
    if value == 0 and zero_means is not None:
        return zero_means
    if value != int(value) or value < 1:
        raise ValueError(f"{name}: expected a positive integer, got {text!r}")
    return int(value)


def _env_seconds(name, default):
    text = os.environ.get(name, "")
    if text == "":
        return default
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{name}: expected a number of seconds, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name}: expected a positive number of seconds, got {text!r}")
    return int(value) if value == int(value) else value


EVAL_SEQ_LEN = _env_int("XV_SEQUENCE_LEN", 2048)         # context length of evaluate_bpb
MAX_SEQ_LEN = _env_int("XV_TRAIN_SEQUENCE_LEN", 0, zero_means=EVAL_SEQ_LEN)  # training context
TIME_BUDGET = _env_seconds("XV_TIME_BUDGET_S", 300)      # training time budget in seconds
EVAL_TOKENS = _env_int("XV_EVAL_TOKENS", 40 * 524288)    # validation tokens of the final eval

DATA_DIR = os.environ.get("XV_DATA_DIR", "")
TOKENIZER_DIR = os.path.join(DATA_DIR, "tokenizer") if DATA_DIR else ""
REFILL_DOCUMENTS = 128  # documents per buffer refill: upstream's tokenizer batch, xv-train's chunk


def _data_dir():
    if not DATA_DIR:
        raise RuntimeError("XV_DATA_DIR is not set: run this fork under xv-worker, or set it to a "
                           "data directory made by `xvctl prepare`")
    return DATA_DIR


def _default_device():
    wanted = os.environ.get("XV_DEVICE", "")
    if wanted:
        return "cpu" if wanted == "cpu" else "cuda"
    return "cuda" if torch.cuda.is_available() else "cpu"

# ---------------------------------------------------------------------------
# Token shards (`.xvt` version 1, docs/data.md; tokenizer/token_shard_format.h)
# ---------------------------------------------------------------------------

_SHARD_MAGIC = b"XVTOKSH1"
_SHARD_TRAILER = b"XVTE"
_SHARD_HEADER = struct.Struct("<8sIIIIQQQQII")  # 64 bytes


class TokenShard:
    """One token shard, memory-mapped: documents as int32 arrays. Checks the header, its crc32,
    the size, the trailer and every block checksum; errors name the file."""

    def __init__(self, path):
        self.path = path
        raw = np.memmap(path, dtype=np.uint8, mode="r")
        size = raw.shape[0]
        if size < _SHARD_HEADER.size + 8:
            raise ValueError(f"{path}: {size} bytes, shorter than a shard header")
        header = bytes(raw[:_SHARD_HEADER.size])
        (magic, version, vocab, width, block, docs, tokens, off_table, crc_table, _flags,
         header_crc) = _SHARD_HEADER.unpack(header)
        if magic != _SHARD_MAGIC:
            raise ValueError(f"{path}: offset 0: not an xv token shard (magic {magic!r})")
        if zlib.crc32(header[:60]) != header_crc:
            raise ValueError(f"{path}: offset 60: header checksum mismatch")
        if version != 1:
            raise ValueError(f"{path}: offset 8: version {version}, this module reads version 1")
        if width not in (2, 4):
            raise ValueError(f"{path}: offset 16: token width {width} (expected 2 or 4)")
        blocks = (crc_table + block - 1) // block
        expected = crc_table + 4 * blocks + 8
        if size != expected:
            raise ValueError(f"{path}: the file is {size} bytes but its header describes "
                             f"{expected} bytes")
        if bytes(raw[size - 4:]) != _SHARD_TRAILER:
            raise ValueError(f"{path}: offset {size - 4}: trailer magic missing")
        checksums = np.frombuffer(raw, dtype="<u4", count=blocks, offset=crc_table)
        for i in range(blocks):
            begin = i * block
            end = min(begin + block, crc_table)
            if zlib.crc32(raw[begin:end]) != int(checksums[i]):
                raise ValueError(f"{path}: offset {begin}: checksum mismatch in block {i}")
        self.vocab_size = vocab
        self.tokens = np.frombuffer(raw, dtype="<u2" if width == 2 else "<u4", count=tokens,
                                    offset=_SHARD_HEADER.size)
        self.offsets = np.frombuffer(raw, dtype="<u8", count=docs + 1, offset=off_table)
        if int(self.offsets[0]) != 0 or int(self.offsets[-1]) != tokens:
            raise ValueError(f"{path}: offset {off_table}: the offset table does not span the "
                             f"{tokens} tokens")

    def __len__(self):
        return self.offsets.shape[0] - 1

    def document(self, i):
        begin, end = int(self.offsets[i]), int(self.offsets[i + 1])
        return self.tokens[begin:end].astype(np.int32)


def _split_shards(split):
    shard_dir = os.path.join(_data_dir(), "shards")
    if split == "train":
        names = sorted(n for n in os.listdir(shard_dir)
                       if n.startswith("train-") and n.endswith(".xvt")
                       and n[len("train-"):-len(".xvt")].isdigit())
        if not names:
            raise FileNotFoundError(f"{shard_dir}: no train shard (train-NNNNN.xvt)")
        return [os.path.join(shard_dir, n) for n in names]
    path = os.path.join(shard_dir, "val-00000.xvt")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: the pinned validation shard is missing")
    return [path]


def _documents(split):
    """Endless (document, epoch) pairs of a split: its shards in order, cycled, empty documents
    skipped; the epoch counts the passes (1-based), as xv-train's ShardDocumentSource does."""
    shards = [TokenShard(p) for p in _split_shards(split)]
    if sum(int(s.offsets[-1]) for s in shards) == 0:
        raise ValueError(f"{shards[0].path}: the {split} shards hold no tokens")
    epoch = 1
    while True:
        for shard in shards:
            for i in range(len(shard)):
                doc = shard.document(i)
                if doc.shape[0] > 0:
                    yield doc, epoch
        epoch += 1

# ---------------------------------------------------------------------------
# Tokenizer
# ---------------------------------------------------------------------------


class Tokenizer:
    """The data directory's tokenizer: tokenizer/tokenizer.json and tokenizer/ranks.tiktoken."""

    def __init__(self, meta, ranks_path):
        self.meta = meta
        self.ranks_path = ranks_path
        self.bos_token_id = int(meta["bos_id"])
        self._enc = None
        self._token_bytes = None

    @classmethod
    def from_directory(cls, tokenizer_dir=None):
        tokenizer_dir = tokenizer_dir or os.path.join(_data_dir(), "tokenizer")
        path = os.path.join(tokenizer_dir, "tokenizer.json")
        with open(path, "r", encoding="utf-8") as f:
            meta = json.load(f)
        for field in ("pattern", "special_tokens", "bos_id", "vocab_size"):
            if field not in meta:
                raise ValueError(f"{path}: field {field} is missing")
        return cls(meta, os.path.join(tokenizer_dir, "ranks.tiktoken"))

    def get_vocab_size(self):
        return int(self.meta["vocab_size"])

    def get_bos_token_id(self):
        return self.bos_token_id

    def _ranks(self):
        ranks = {}
        with open(self.ranks_path, "rb") as f:
            for line in f:
                if line.strip():
                    token, rank = line.split()
                    ranks[base64.b64decode(token)] = int(rank)
        return ranks

    def _encoding(self):
        if self._enc is None:
            try:
                import tiktoken
            except ImportError:
                raise ImportError("Tokenizer.encode needs the tiktoken package (pip install "
                                  "tiktoken); training and evaluation do not encode") from None
            self._enc = tiktoken.Encoding(name="xv", pat_str=self.meta["pattern"],
                                          mergeable_ranks=self._ranks(),
                                          special_tokens=self.meta["special_tokens"])
        return self._enc

    def encode(self, text, prepend=None, num_threads=8):
        if prepend is not None and not isinstance(prepend, int):
            raise TypeError(f"prepend must be an int token id, got {type(prepend)}")
        enc = self._encoding()
        if isinstance(text, str):
            rows, single = [enc.encode_ordinary(text)], True
        elif isinstance(text, list):
            rows, single = enc.encode_ordinary_batch(text, num_threads=num_threads), False
        else:
            raise ValueError(f"Invalid input type: {type(text)}")
        if prepend is not None:
            for row in rows:
                row.insert(0, prepend)
        return rows[0] if single else rows

    def decode(self, ids):
        if self._token_bytes is None:
            table = {rank: token for token, rank in self._ranks().items()}
            for name, i in self.meta["special_tokens"].items():
                table[int(i)] = name.encode("utf-8")
            self._token_bytes = table
        return b"".join(self._token_bytes[int(i)] for i in ids).decode("utf-8", errors="replace")


def get_token_bytes(device="cpu"):
    """Raw byte length of every token id (0 for specials), int32, from token_bytes.json."""
    path = os.path.join(_data_dir(), "tokenizer", "token_bytes.json")
    with open(path, "r", encoding="utf-8") as f:
        values = json.load(f)
    if isinstance(values, dict):
        values = values["token_bytes"]
    return torch.tensor(values, dtype=torch.int32, device=device)

# ---------------------------------------------------------------------------
# Best-fit packing
# ---------------------------------------------------------------------------


class _BestFitBuffer:
    """Buffered documents by length, each length a FIFO queue: the largest that fits is
    upstream's choice (the earliest among equal lengths), in O(log n) instead of a scan."""

    def __init__(self):
        self.by_length = {}
        self.lengths = []  # sorted lengths that have a queue
        self.count = 0

    def add(self, doc):
        n = doc.shape[0]
        queue = self.by_length.get(n)
        if queue is None:
            queue = self.by_length[n] = deque()
            insort(self.lengths, n)
        queue.append(doc)
        self.count += 1

    def take(self, remaining):
        """The largest document of length <= remaining, else the shortest (to be cropped)."""
        i = bisect_right(self.lengths, remaining) - 1
        n = self.lengths[i] if i >= 0 else self.lengths[0]
        queue = self.by_length[n]
        doc = queue.popleft()
        if not queue:
            del self.by_length[n]
            self.lengths.remove(n)
        self.count -= 1
        return doc


def _packed_rows(split, B, T, buffer_size):
    """Endless (rows [B, T+1] int64 numpy, epoch): xv-train's BestFitPacker on the split."""
    documents = _documents(split)
    buffer = _BestFitBuffer()
    capacity = T + 1
    epoch = 1
    while True:
        rows = np.empty((B, capacity), dtype=np.int64)
        for r in range(B):
            pos = 0
            while pos < capacity:
                while buffer.count < buffer_size:
                    for _ in range(REFILL_DOCUMENTS):
                        doc, epoch = next(documents)
                        buffer.add(doc)
                remaining = capacity - pos
                doc = buffer.take(remaining)
                take = min(doc.shape[0], remaining)
                rows[r, pos:pos + take] = doc[:take]
                pos += take
        yield rows, epoch


def make_dataloader(tokenizer, B, T, split, buffer_size=1000, device=None):
    """BOS-aligned best-fit batches of the split: yields (inputs [B, T], targets [B, T], epoch)
    on `device` (default XV_DEVICE). Every row starts at a document start (with BOS); no padding.
    `tokenizer` is upstream's argument; the shards already hold token ids."""
    assert split in ("train", "val"), f"split must be train or val, got {split!r}"
    del tokenizer
    device = device or _default_device()
    on_gpu = torch.device(device).type == "cuda"
    for rows, epoch in _packed_rows(split, B, T, buffer_size):
        batch = torch.from_numpy(rows)
        if on_gpu:
            batch = batch.pin_memory().to(device, non_blocking=True)
        yield batch[:, :-1].contiguous(), batch[:, 1:].contiguous(), epoch

# ---------------------------------------------------------------------------
# Evaluation (the fixed metric)
# ---------------------------------------------------------------------------


@torch.no_grad()
def evaluate_bpb(model, tokenizer, batch_size):
    """val_bpb under METRIC_VERSION: EVAL_TOKENS // (batch_size * EVAL_SEQ_LEN) batches (at least
    one) of the val split; nats summed in fp64 over targets with a byte length > 0, divided by
    ln 2 times the summed byte lengths. `model(x, y, reduction='none')` gives per-token losses."""
    device = _model_device(model)
    token_bytes = get_token_bytes(device=device).long()
    vocab = token_bytes.shape[0]
    loader = make_dataloader(tokenizer, batch_size, EVAL_SEQ_LEN, "val", device=device)
    steps = max(1, EVAL_TOKENS // (batch_size * EVAL_SEQ_LEN))
    total_nats = torch.zeros((), dtype=torch.float64, device=device)
    total_bytes = torch.zeros((), dtype=torch.int64, device=device)
    for _ in range(steps):
        x, y, _ = next(loader)
        loss_flat = model(x, y, reduction="none").view(-1).double()
        y_flat = y.view(-1)
        if bool(((y_flat < 0) | (y_flat >= vocab)).any()):
            raise ValueError(f"validation split: target ids outside the vocabulary of {vocab}")
        nbytes = token_bytes[y_flat]
        total_nats += (loss_flat * (nbytes > 0).double()).sum()
        total_bytes += nbytes.sum()
    if int(total_bytes) <= 0:
        raise ValueError("validation split: no target token has a byte length (only specials?)")
    return float(total_nats) / (math.log(2) * float(total_bytes))


def _model_device(model):
    for p in model.parameters():
        return p.device
    for b in model.buffers():
        return b.device
    return torch.device(_default_device())
