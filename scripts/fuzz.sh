#!/usr/bin/env bash
# Fuzz every reader, and the formula language, for FUZZTIME each (make fuzz). A target fails the run
# when it finds something: a failing input written to its
# testdata/fuzz/TARGET/, or a failure other than the fuzzing coordinator's
# "context deadline exceeded" at the end of -fuzztime, a known race of
# go test -fuzz on loaded machines that writes no input and finds nothing
# (it is reported, and the target's corpus replayed to be sure).
set -uo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-10s}
targets=(
	./internal/npy/:FuzzReader
	./internal/npy/:FuzzNPZ
	./internal/volume/:FuzzNIfTIFile
	./internal/volume/:FuzzMetaImage
	./internal/volume/:FuzzDICOM
	./ops/:FuzzGeometry
	./internal/shard/:FuzzShardMeta
	./internal/formula/:FuzzFormula
)
status=0
for t in "${targets[@]}"; do
	pkg=${t%%:*} name=${t#*:}
	corpus="$pkg/testdata/fuzz/$name"
	before=$(ls "$corpus" 2>/dev/null | sort)
	echo "== $name ($pkg, $FUZZTIME)"
	out=$("$GO" test -run '^$' -fuzz "^$name\$" -fuzztime "$FUZZTIME" -fuzzminimizetime 2s "$pkg" 2>&1)
	rc=$?
	echo "$out" | tail -3
	after=$(ls "$corpus" 2>/dev/null | sort)
	if [ $rc = 0 ]; then
		continue
	fi
	if [ "$before" != "$after" ] || ! echo "$out" | grep -q '^    context deadline exceeded$' || echo "$out" | grep -q 'Failing input'; then
		echo "FAIL: $name found a failing input:"
		echo "$out" | grep -v '^fuzz: elapsed' | head -40
		status=1
		continue
	fi
	echo "note: $name ended with the fuzzing coordinator's deadline race (no failing input); replaying its corpus"
	"$GO" test -run "^$name\$" "$pkg" >/dev/null || { echo "FAIL: $name's corpus fails"; status=1; }
done
exit $status
