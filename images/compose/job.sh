#!/bin/sh
# One compose job: run the command the plan service wrote for $FRAMEWORK, echo its stdout, keep
# both streams beside the result (like `harness run` does), and always exit 0 so the next job and
# the report still run; the report turns a crash without a result file into a `failed` result.
set -eu
run=$(cat "/results/${RUN_POINTER:-.compose-run}")
dir="/results/$run"
set -f  # the arguments are one per line; no globbing of JSON parameters
IFS='
'
# shellcheck disable=SC2046
set -- $(cat "$dir/.compose/$FRAMEWORK.args")
unset IFS
set +e
{ "$@" 2>"$dir/logs/$FRAMEWORK.stderr.log"; echo $? >"$dir/.compose/$FRAMEWORK.exit"; } | tee "$dir/logs/$FRAMEWORK.stdout.log"
code=$(cat "$dir/.compose/$FRAMEWORK.exit")
if [ "$code" != 0 ]; then
  echo "$FRAMEWORK: exited with code $code; last lines of its stderr:" >&2
  tail -n 20 "$dir/logs/$FRAMEWORK.stderr.log" >&2
fi
exit 0
