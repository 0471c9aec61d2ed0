#!/bin/sh
# Run one libFuzzer target briefly: a scratch corpus (deleted afterwards) in
# front of the committed seeds, so the source tree is never written to.
set -eu
target=$1 seeds=$2 seconds=${3:-20}
work=$(mktemp -d /tmp/gensee-fuzz.XXXXXX)
trap 'rm -rf "$work"' EXIT
"$target" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 \
	-artifact_prefix="$work/" -print_final_stats=1 "$work" "$seeds"
