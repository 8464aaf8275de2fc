#!/bin/sh
# One compose job: run the command the plan service wrote into this job's own folder (mounted at
# /results; the run folder and the other jobs' folders are not mounted at all), keep both streams
# and the exit code beside the result for the report service, echo stdout, and always exit 0 so
# the next job and the report still run; the report turns a crash without a result file into a
# `failed` result.
set -eu
dir=/results
set -f  # the arguments are one per line; no globbing of JSON parameters
IFS='
'
# shellcheck disable=SC2046
set -- $(cat "$dir/job.args")
unset IFS
set +e
{ "$@" 2>"$dir/stderr.log"; echo $? >"$dir/exit"; } | tee "$dir/stdout.log"
code=$(cat "$dir/exit")
if [ "$code" != 0 ]; then
  echo "${FRAMEWORK:-job}: exited with code $code; last lines of its stderr:" >&2
  tail -n 20 "$dir/stderr.log" >&2
fi
exit 0
