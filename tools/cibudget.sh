#!/usr/bin/env bash
# cibudget.sh LOG checks the package wall times in LOG (the output of
# `go test ./...`: its "ok  <package>  <seconds>s" lines) against the cold
# budgets of the CI issue: engine/ops and engine at most 360 s each. It
# prints every package's time, slowest first, and fails when a budgeted
# package took more than its budget plus 20%, has no time in LOG, or when
# the log has a failure.
set -euo pipefail
log=${1:?usage: cibudget.sh LOG}
echo "cibudget: package wall times (shader cache: ${MESA_SHADER_CACHE_DIR:-default})"
awk -F'\t' '$1 ~ /^ok/ && $3 ~ /s$/ { sub(/s$/, "", $3); printf "  %8.1f s  %s\n", $3, $2 }' "$log" | sort -rn
awk -F'\t' '
BEGIN {
	budget["github.com/vkllm/vkllm/engine/ops"] = 360
	budget["github.com/vkllm/vkllm/engine"] = 360
}
/^(FAIL|--- FAIL)/ { failed = 1 }
$1 ~ /^ok/ && ($2 in budget) { t = $3; sub(/s$/, "", t); took[$2] = t + 0 }
END {
	bad = 0
	if (failed) { print "cibudget: the log has failures"; bad = 1 }
	for (p in budget) {
		lim = budget[p] * 1.2
		if (!(p in took)) { print "cibudget: no time for " p; bad = 1; continue }
		if (took[p] > lim) {
			printf "cibudget: %s took %.1f s: over its %d s budget by more than 20%% (%d s)\n", p, took[p], budget[p], lim
			bad = 1
		} else if (took[p] > budget[p]) {
			printf "cibudget: %s %.1f s: over its %d s budget, within the 20%% margin (%d s)\n", p, took[p], budget[p], lim
		} else {
			printf "cibudget: %s %.1f s, within its %d s budget\n", p, took[p], budget[p]
		}
	}
	exit bad
}' "$log"
