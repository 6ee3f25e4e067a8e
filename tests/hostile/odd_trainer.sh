#!/usr/bin/env bash
# A `command` trainer that prints what a careless trainer might (docs/worker.md § Command trainers),
# for the hostile-input suite (tests/hostile/). The worker's --config lists it once per mode, as
# `args: [MODE]`, output `auto`; each mode prints its odd output at once and exits:
#
#   stderr-invalid-utf8   b"\xff\xfe" on stderr (not UTF-8), then exit 1
#   stderr-long-eacute    two stderr lines of 18,001 bytes each, as a tqdm bar or a non-English
#                         message: "x" then 9,000 "é" (a cut keeping a line's head at an even
#                         byte count ends inside a character), and 9,000 "é" then "x" (a cut
#                         keeping the last bytes at an even count starts inside one); exit 1
#   error-3mb-nested      one `error` event line of about 3 MB, its message an array nested
#                         1,500,000 deep (under the worker's 4 MiB line cap), then exit 1
#   control-chars         an `error` event whose kind and message hold ESC, BEL, CR, LF and a C1
#                         CSI, a stdout log line and a stderr line with raw ESC sequences; exit 1
#   summary-negative      an xv `summary` event with val_bpb -3.5, exit 0
#   summary-zero          an xv `summary` event with val_bpb 0.0, exit 0
#   summary-huge-tokens   an xv `summary` event with total_tokens 1e300, exit 0
#   summary-progress      a `step` event with progress 1e9, then a plausible summary, exit 0
#   upstream-nan          upstream train.py's summary block with `val_bpb: nan`, exit 0
#   upstream-huge-tokens  upstream's block with `total_tokens_M: 1e300`, exit 0
#   ok                    a plausible summary (val_bpb 1.5), exit 0
set -u

summary() {  # summary VAL_BPB TOTAL_TOKENS NUM_STEPS
  printf '{"type":"summary","t":0.2,"val_bpb":%s,"training_seconds":0.1,"total_seconds":0.2,' "$1"
  printf '"num_steps":%s,"total_tokens":%s,"num_params":100,"tok_per_sec":1000.0,' "$3" "$2"
  printf '"mfu_percent":null,"peak_flops":null,"metric_version":"1"}\n'
}

upstream_block() {  # upstream_block VAL_BPB TOTAL_TOKENS_M
  printf 'step 00002 (100.0%%) | loss: 3.000000 | lrm: 1.00 | dt: 1ms | tok/sec: 1,000 | mfu: 1.0%% | epoch: 1 | remaining: 0s\n'
  printf -- '---\n'
  printf 'val_bpb:          %s\n' "$1"
  printf 'training_seconds: 0.1\n'
  printf 'total_seconds:    0.2\n'
  printf 'peak_vram_mb:     0.0\n'
  printf 'mfu_percent:      1.00\n'
  printf 'total_tokens_M:   %s\n' "$2"
  printf 'num_steps:        3\n'
  printf 'num_params_M:     0.1\n'
  printf 'depth:            2\n'
}

start_event() {
  printf '{"type":"start","t":0.0,"device":{"name":"cpu: odd trainer"}}\n'
}

mode=${1:-}
case "$mode" in
  stderr-invalid-utf8)
    start_event
    printf 'Traceback (most recent call last):\n\xff\xfe\n' >&2
    exit 1
    ;;
  stderr-long-eacute)
    start_event
    eacutes() { head -c 9000 /dev/zero | tr '\0' 'a' | sed 's/a/é/g'; }
    { printf 'x'; eacutes; printf '\n'; eacutes; printf 'x\n'; } >&2
    exit 1
    ;;
  error-3mb-nested)
    start_event
    {
      printf '{"type":"error","kind":"crashed","message":'
      head -c 1500000 /dev/zero | tr '\0' '['
      head -c 1500000 /dev/zero | tr '\0' ']'
      printf '}\n'
    }
    exit 1
    ;;
  control-chars)
    start_event
    printf '{"type":"error","kind":"crashed\\u001b[2J","message":"\\u001b]0;pwned\\u0007 boom\\r\\n\\u009b31m red"}\n'
    printf 'log line with \033]0;retitled\007 and \033[2J\n'
    printf 'stderr with \033]0;retitled\007 and \033[2J\r\n' >&2
    exit 1
    ;;
  summary-negative) start_event; summary -3.5 61440 30; exit 0 ;;
  summary-zero) start_event; summary 0.0 61440 30; exit 0 ;;
  summary-huge-tokens) start_event; summary 1.5 1e300 30; exit 0 ;;
  summary-progress)
    start_event
    printf '{"type":"step","t":0.1,"step":1,"loss":3.0,"progress":1e9}\n'
    summary 1.5 61440 30
    exit 0
    ;;
  upstream-nan) upstream_block nan 0.1; exit 0 ;;
  upstream-huge-tokens) upstream_block 1.5 1e300; exit 0 ;;
  ok) start_event; summary 1.5 61440 30; exit 0 ;;
  *)
    echo "odd_trainer: unknown mode '$mode'" >&2
    exit 2
    ;;
esac
