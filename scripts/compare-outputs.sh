#!/usr/bin/env bash
# compare-outputs.sh: a before/after output sweep of tapeloop, the CLI and the
# Python package, to show that a refactor changed no behaviour.
#
#   scripts/compare-outputs.sh build SRC BIN
#       build SRC's CLI into BIN and SRC's c-shared library into
#       SRC/python/tapeloop/libtapeloop.so (SRC: a checkout or worktree)
#   scripts/compare-outputs.sh run BIN PYDIR OUTDIR
#       run every case with the CLI BIN and the Python package in PYDIR (a
#       directory holding tapeloop/ with its libtapeloop.so; "-" to skip the
#       Python case); write one file per case to OUTDIR/cases/NAME.txt
#       (the command lines, exit statuses, stdout and stderr with timings
#       normalised away, and the sha256 of every file the case wrote, with
#       --report files stripped of their timing fields and shown inline, and
#       the CSVs inline). OUTDIR/work/NAME keeps the files themselves.
#   scripts/compare-outputs.sh compare DIR_A DIR_B
#       one table, case -> identical / differs / only in A|B, then a diff of
#       each case that differs; exit status 0 when every case is identical.
#
# The inputs are generated with NumPy (fixed seed) into $INPUTS
# (default /tmp/sweep/inputs) when missing; their sha256 is case _inputs.
# Needs bash, coreutils, jq, timeout, and a python3 with NumPy ($PYTHON,
# default /usr/bin/python3). Environment of every run: TAPELOOP_MEM_LIMIT=1GiB
# (so the planned batch does not follow the free memory) and GOMAXPROCS=2;
# TAPELOOP_DEVICE, TAPELOOP_DEVICES and TAPELOOP_LIB are unset.
set -u

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PYTHON=${PYTHON:-/usr/bin/python3}
INPUTS=${INPUTS:-/tmp/sweep/inputs}
STEP_TIMEOUT=${STEP_TIMEOUT:-120}

usage() { sed -n '2,25p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }

# ---------------------------------------------------------------- recording

# The normalisation every step's stderr (and stdout) gets: the input, case
# and work directories by name, the per-run numbers of the summary line
# (median, drift, heap growth, peak RSS), the phases' times, the process's
# resident memory at start as the plan reports it, pids.
norm() {
	sed -e "s#${INPUTS}#<inputs>#g" -e "s#${D}#<case>#g" -e "s#${WORK}#<work>#g" \
		-e 's#median [^ ]* ms/batch#median <ms> ms/batch#g' \
		-e 's#drift [^ ]* (last/first decile)#drift <drift> (last/first decile)#g' \
		-e 's#heap growth [^,]*, peak RSS [0-9.]* [A-Za-z]*#heap growth <heap>, peak RSS <rss>#g' \
		-e 's#pid [0-9][0-9]*#pid <pid>#g' \
		-e 's#: phases: .*; wall [0-9.]* s#: phases: <times>#' \
		-e 's#estimated peak RSS [0-9.]* [A-Za-z]*: the total, the process.s [0-9.]* [A-Za-z]* at start#estimated peak RSS <rss>: the total, the process'"'"'s <rss> at start#' \
		-e 's#"\(baseline_rss_bytes\|estimated_peak_rss_bytes\)": [0-9][0-9]*#"\1": <rss>#g' \
		-e 's#\r#\\r#g'
}
# NORM=digits: every number too (a step whose counts depend on timing).
# NORM=demo: only demo's columns workload, size, batches and result.
# NORM=info: the memory lines' sizes.
normalise() {
	case "${NORM:-}" in
	digits) norm | sed -e 's/[0-9][0-9]*/N/g' ;;
	demo) norm | awk -F'  +' '{ printf "%s | %s | %s | %s\n", $1, $2, $3, $8 }' ;;
	info) norm | sed -E -e '/^(memory available|default --mem-limit|open files)/s/[0-9][0-9.]*( ?[KMGT]i?B)?/<n>/g' ;;
	*) norm ;;
	esac
}

indent() { sed 's/^/    /'; }

# begin NAME: a new case, in a fresh directory $D; its steps run there.
begin() {
	CASE=$1
	D=$WORK/$CASE
	echo "$(date +%s.%N) $CASE" >>"$IO/times"
	rm -rf "$D"
	mkdir -p "$D"
	CF=$CASES/$CASE.txt
	N=0
	echo "case $CASE" >"$CF"
	NAMES+=("$CASE")
}

show_cmd() { # the command line of a step, paths as <inputs>
	local s
	s=$(printf '%q ' "$@")
	printf '%s' "${s% }" | sed -e "s#${INPUTS}#<inputs>#g"
}

record() { # record RC OUTFILE ERRFILE CMD...
	local rc=$1 o=$2 e=$3
	shift 3
	{
		echo "[$N] ${LABEL:+$LABEL }${ENVV:+$ENVV }\$ $(show_cmd "$@")"
		echo "  exit: $rc"
		if [ -s "$o" ]; then echo "  stdout:"; normalise <"$o" | indent; fi
		if [ -s "$e" ]; then echo "  stderr:"; NORM=${ENORM:-${NORM:-}} normalise <"$e" | indent; fi
	} >>"$CF"
}

# step ARGS…: run `tapeloop ARGS…` in the case's directory. ENVV="K=V …"
# sets environment variables for it; NORM as above.
step() {
	N=$((N + 1))
	local o=$IO/$CASE.$N.out e=$IO/$CASE.$N.err rc
	# shellcheck disable=SC2086
	(cd "$D" && exec env ${ENVV:-} timeout "$STEP_TIMEOUT" "$BIN" "$@") >"$o" 2>"$e" </dev/null
	rc=$?
	record "$rc" "$o" "$e" tapeloop "$@"
}

# interrupt CKPT MINBYTES ARGS…: start `tapeloop ARGS…`, send it SIGINT once
# CKPT (in the case's directory) holds more than MINBYTES, and record its
# exit status and its stderr with every number normalised (how far it got
# depends on timing). "sent: no" in the record means the run ended before
# the harness saw the checkpoint grow (a machine too loaded): that case then
# differs for a reason of timing, not of behaviour; run the sweep again.
interrupt() {
	local ck=$1 min=$2 pid i sent=no rc
	shift 2
	N=$((N + 1))
	local o=$IO/$CASE.$N.out e=$IO/$CASE.$N.err
	(cd "$D" && exec "$BIN" "$@") >"$o" 2>"$e" </dev/null &
	pid=$!
	for i in $(seq 1 4000); do
		if [ "$(stat -c %s "$D/$ck" 2>/dev/null || echo 0)" -gt "$min" ]; then
			kill -INT "$pid" 2>/dev/null && sent=yes
			break
		fi
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.005
	done
	wait "$pid"
	rc=$?
	LABEL="(SIGINT once $ck > $min bytes; sent: $sent)" NORM=digits record "$rc" "$o" "$e" tapeloop "$@"
}

# same A B: whether two files of the case are byte for byte the same.
same() {
	if cmp -s "$D/$1" "$D/$2"; then echo "same $1 $2: yes" >>"$CF"; else echo "same $1 $2: NO" >>"$CF"; fi
}

# end: the files the case left, each with its sha256 and size; reports
# normalised, CSVs inline, .npz members listed.
end() {
	local f rel npz=()
	echo "files:" >>"$CF"
	while IFS= read -r rel; do
		f=$D/$rel
		case "$rel" in
		*report*.json)
			jq -S 'walk(if type == "object" then del(.total_seconds, .items_per_second, .check_seconds, .compute_seconds, .read_seconds, .startup_seconds, .wall_seconds, .write_seconds, .peak_rss_bytes, .baseline_rss_bytes, .estimated_peak_rss_bytes, .median_ms, .drift, .heap_growth_bytes, .seconds, .heap_bytes, .rss_bytes) else . end)' "$f" >"$IO/report.json" 2>&1
			echo "  $(sha256sum <"$IO/report.json" | cut -c1-64)  (normalised)  $rel" >>"$CF"
			indent <"$IO/report.json" | indent >>"$CF"
			;;
		*)
			echo "  $(sha256sum <"$f" | cut -c1-64)  $(stat -c %s "$f")  $rel" >>"$CF"
			case "$rel" in
			*.csv) [ "$(stat -c %s "$f")" -le 16384 ] && indent <"$f" | indent >>"$CF" ;;
			*.npz) npz+=("$f") ;;
			esac
			;;
		esac
	done < <(cd "$D" && find . -type f -printf '%P\n' | LC_ALL=C sort)
	# the .npz members are listed at the end of the run, in one python call
	[ ${#npz[@]} -gt 0 ] && printf '%s\n' "${npz[@]}" >"$IO/$CASE.npz"
}

# The .npz members of every case, appended to its file: one python call.
npz_members() {
	local lists=("$IO"/*.npz) l
	[ -e "${lists[0]}" ] || return 0
	"$PYTHON" "$HERE/compare_outputs_py.py" npzsum "${lists[@]}" >"$IO/npzsum.out" 2>&1 || cat "$IO/npzsum.out" >&2
	for l in "${lists[@]}"; do
		CF=$CASES/$(basename "$l" .npz).txt
		echo "npz members:" >>"$CF"
		grep -F "@@ $(basename "$l" .npz) " "$IO/npzsum.out" | sed 's/^@@ [^ ]* /    /' >>"$CF"
	done
}

# one NAME ARGS…: a case of one step.
one() {
	local name=$1
	shift
	begin "$name"
	step "$@"
	end
}

# ---------------------------------------------------------------- the cases

cases_interp() {
	local I=$INPUTS B=(--points 4000 --grid 64 --interpolants 12)
	one interp_builtin_f32 interp "${B[@]}"
	one interp_builtin_f64 interp "${B[@]}" --dtype float64
	one interp_builtin_seed_a_dx interp "${B[@]}" --seed 9 -a 0.25 --dx 0.01 --dtype float64
	one interp_builtin_sum_f32 interp "${B[@]}" --reduce sum
	one interp_builtin_none_out interp --points 500 --grid 64 --interpolants 12 --reduce none --out y.npy
	one interp_builtin_batch_report interp "${B[@]}" --batch 700 -v --report report.json
	one interp_builtin_memlimit_plan interp "${B[@]}" --mem-limit 40KiB -v
	one interp_builtin_quiet interp "${B[@]}" -q --dtype float64
	local dt red
	for dt in float32 float64; do
		for red in sumsq sum none; do
			one "interp_files_${red}_${dt}" interp -f "$I/f.npy" -x "$I/x.npy" --reduce "$red" --dtype "$dt" --out y.npy
		done
		one "interp_files_direct_sumsq_${dt}" interp -f "$I/f.npy" -x "$I/x.npy" --method direct --dtype "$dt" --out y.npy
		one "interp_files_direct_sum_${dt}" interp -f "$I/f.npy" -x "$I/x.npy" --method direct --reduce sum --dtype "$dt" --out y.npy
		one "interp_formula_max_${dt}" interp -f "$I/f.npy" -x "$I/x.npy" --reduce 'max(v)' --dtype "$dt" --out y.npy
		one "interp_formula_params_${dt}" interp -f "$I/f.npy" -x "$I/x.npy" --reduce 'mean(exp(-k*v))+c' --param k=1.5 --param c=0.25 --dtype "$dt" --out y.npy
	done
	one interp_formula_x_f64 interp -f "$I/f.npy" -x "$I/x.npy" --reduce 'sum(v*x)' --dtype float64 --out y.npy
	one interp_formula_sumsq_same_f64 interp -f "$I/f.npy" -x "$I/x.npy" --reduce 'sum(v^2)' --dtype float64 --out y.npy
	one interp_formula_direct_f32 interp -f "$I/f.npy" -x "$I/x.npy" --reduce 'min(v)' --method direct --out y.npy
	one interp_formula_nonfinite interp -f "$I/f.npy" -x "$I/x.npy" --reduce 'sum(log(v))' --out y.npy
	one interp_formula_nonfinite_fail interp -f "$I/f.npy" -x "$I/x.npy" --reduce 'sum(log(v))' --fail-on-nonfinite --out y.npy
	one interp_files_f32_inputs interp -f "$I/f32.npy" -x "$I/x32.npy" --out y.npy
	one interp_f_builtin_x interp -f "$I/f.npy" --points 2000 --seed 5 --dtype float64
	one interp_files_a_dx interp -f "$I/f.npy" -x "$I/x.npy" -a -0.5 --dx 0.05 --dtype float64 --out y.npy
	one interp_files_report interp -f "$I/f.npy" -x "$I/x.npy" --batch 1000 --report report.json --reduce 'max(v)'
}

cases_affinity() {
	local I=$INPUTS B=(-n 40 --height 6 --width 5) dt m
	for dt in float32 float64; do
		for m in dot cosine l1 l2; do
			one "affinity_builtin_${m}_${dt}" affinity "${B[@]}" --metric "$m" --dtype "$dt" --out a.npy
		done
		one "affinity_formula_auto_${dt}" affinity "${B[@]}" --formula 'exp(-sum((a-b)^2)/(2*s^2))' --param s=4 --dtype "$dt" --out a.npy
		one "affinity_formula_direct_${dt}" affinity "${B[@]}" --formula 'exp(-sum((a-b)^2)/(2*s^2))' --param s=4 --method direct --dtype "$dt" --out a.npy
		one "affinity_topk_${dt}" affinity "${B[@]}" --metric cosine --topk 5 --dtype "$dt" --out t.npz
	done
	one affinity_builtin_stdout affinity "${B[@]}"
	one affinity_builtin_seed affinity -n 33 --height 4 --width 7 --seed 3 --metric l2 --out a.npy
	one affinity_formula_l1like affinity "${B[@]}" --formula '-sum(abs(a-b))' --out a.npy
	one affinity_formula_dots affinity "${B[@]}" --formula 'sum(a*b)/(sqrt(sum(a^2))*sqrt(sum(b^2))+e)' --param e=0.001 --dtype float64 --out a.npy
	one affinity_topk_formula affinity "${B[@]}" --formula '-sum(abs(a-b))' --topk 3 --out t.npz
	one affinity_images_f32_dot affinity --images "$I/images.npy" --out a.npy
	one affinity_images_f64_cosine affinity --images "$I/images.npy" --metric cosine --dtype float64 --out a.npy
	one affinity_images_2d_l2 affinity --images "$I/images64_2d.npy" --metric l2 --out a.npy
	one affinity_images_u8_l1 affinity --images "$I/images_u8.npy" --metric l1 --out a.npy
	one affinity_images_i16_dot_f64 affinity --images "$I/images_i16.npy" --dtype float64 --out a.npy
	one affinity_block_report affinity "${B[@]}" --metric l1 --block 7 -v --report report.json --out a.npy
	one affinity_memlimit affinity "${B[@]}" --mem-limit 20KiB -v

	begin affinity_shards_merge
	step affinity "${B[@]}" --metric l2 --out a.npy
	local i
	for i in 0 1 2; do step affinity "${B[@]}" --metric l2 --shard "$i/3" --out "s$i.npz"; done
	step merge --out m.npy s2.npz s0.npz s1.npz
	same a.npy m.npy
	end

	begin affinity_topk_shards_merge
	step affinity "${B[@]}" --topk 4 --dtype float64 --out t.npz
	step affinity "${B[@]}" --topk 4 --dtype float64 --shard 0/2 --out s0.npz
	step affinity "${B[@]}" --topk 4 --dtype float64 --shard 1/2 --out s1.npz
	step merge --out m.npz s0.npz s1.npz
	same t.npz m.npz
	end

	begin affinity_shards_env
	step affinity "${B[@]}" --out a.npy
	ENVV="SLURM_ARRAY_TASK_ID=0" step affinity "${B[@]}" --shards 2 --out s0.npz
	ENVV="JOB_COMPLETION_INDEX=1" step affinity "${B[@]}" --shards 2 --out s1.npz
	step merge --out m.npy s0.npz s1.npz
	same a.npy m.npy
	end

	begin affinity_merge_refused
	for i in 0 1 2; do step affinity "${B[@]}" --shard "$i/3" --out "s$i.npz" -q; done
	step affinity -n 40 --height 6 --width 5 --seed 2 --shard 2/3 --out foreign.npz -q
	step merge --out m.npy s0.npz s1.npz
	step merge --out m.npy s0.npz s0.npz s1.npz s2.npz
	step merge --out m.npy s0.npz s1.npz foreign.npz
	end
}

cases_drr() {
	local I=$INPUTS B=(--size 24 --detector 12x10 --orbit 4)
	one drr_siddon drr "${B[@]}" --out d
	one drr_stdout_only drr "${B[@]}"
	one drr_trilinear drr "${B[@]}" --method trilinear --out d
	one drr_trilinear_step drr "${B[@]}" --method trilinear --step 0.7 --out d
	one drr_png drr "${B[@]}" --out d --png
	one drr_orbit_params drr --size 20 --detector 9x13 --orbit 3 --sdd 800 --sid 400 --pixel 1.5 --mu-water 0.03 --out d
	one drr_post drr "${B[@]}" --post 'exp(-p)' --out d --png
	one drr_mu_param drr --volume "$I/vol.npy" --detector 12x10 --orbit 3 --mu 'where(h > 1, k*h, 0)' --param k=0.05 --out d
	one drr_hu_npy drr --volume "$I/vol_hu.npy" --hu --detector 12x10 --orbit 3 --out d
	one drr_hu_raw drr --volume "$I/vol_hu.raw" --shape 10,9,8 --dtype int16 --hu --mu-water 0.025 --detector 12x10 --orbit 3 --out d
	one drr_npy_spacing_origin drr --volume "$I/vol.npy" --spacing 1,2,1.5 --origin -5,-9,-5 --detector 12x10 --orbit 3 --out d
	one drr_npy_frame_ras drr --volume "$I/vol.npy" --frame ras --origin 1,2,3 --detector 12x10 --orbit 3 --out d
	one drr_nifti drr --volume "$I/vol.nii" --detector 12x10 --orbit 3 --out d --png
	one drr_mha drr --volume "$I/vol.mha" --detector 12x10 --orbit 3 --method trilinear --out d
	one drr_geometry drr --volume "$I/vol.npy" --origin -6,-5,-4 --geometry "$I/geom.json" --out d --png
	one drr_geometry_trilinear drr --volume "$I/vol.npy" --origin -6,-5,-4 --geometry "$I/geom.json" --method trilinear --out d
	one drr_geometry_missed drr --volume "$I/vol.npy" --origin 5000,5000,5000 --geometry "$I/geom.json" --out d
	one drr_batch_report drr "${B[@]}" --batch 1 -v --report report.json --out d

	begin drr_shards_merge
	local S=(--size 24 --detector 12x10 --orbit 5 --png)
	step drr "${S[@]}" --out d
	step drr "${S[@]}" --shard 0/2 --out s0.npz
	step drr "${S[@]}" --shard 1/2 --out s1.npz
	step merge --out m s1.npz s0.npz
	same d/drr.npy m/drr.npy
	same d/drr_0004.png m/drr_0004.png
	end

	begin drr_resume_absent_and_finished
	step drr "${B[@]}" --out d --resume
	step drr "${B[@]}" --out d
	step drr "${B[@]}" --out d --resume
	end

	# about a second of work, stopped once the checkpoint holds a record
	# (its header is 123 bytes, a 16x16 pose about 1 KiB), then resumed
	begin drr_interrupt_resume
	local R=(drr --size 32 --detector 16x16 --orbit 300 --method trilinear --step 0.02 --batch 1)
	step "${R[@]}" --out ref -q
	interrupt d/drr.npy.ckpt 2000 "${R[@]}" --out d -q
	ENORM=digits step "${R[@]}" --out d -q
	ENORM=digits step "${R[@]}" --out d --resume
	same ref/drr.npy d/drr.npy
	end
}

cases_wavelet() {
	local I=$INPUTS B=(--size 8x8x8)
	one wavelet_default_stdout wavelet "${B[@]}"
	one wavelet_grid wavelet "${B[@]}" --theta 0:pi:3 --phi 0,1 --xi 1,1.5 -a 1.2 --out w.csv
	one wavelet_wrap wavelet "${B[@]}" --boundary wrap --out w.csv
	one wavelet_seed_size wavelet --size 6x7x8 --seed 4 --theta 0.5 --phi 0:pi:3 --xi 1:3:2
	one wavelet_kernel wavelet "${B[@]}" --kernel 'exp(-q/2)*c' --param c=2 --out w.csv
	one wavelet_stats wavelet "${B[@]}" --stat 'l1=sum(abs(g))' --stat 'p=max(g)-k' --param k=1 --out w.csv
	one wavelet_stat_override wavelet "${B[@]}" --stat 'max=max(abs(g))' --out w.csv
	one wavelet_volume_npy wavelet --volume "$I/vol.npy" --out w.csv
	one wavelet_volume_nii wavelet --volume "$I/vol.nii" --boundary wrap
	one wavelet_volume_mha wavelet --volume "$I/vol.mha" -a 0.8
	one wavelet_batch_report wavelet "${B[@]}" --batch 3 -v --report report.json --out w.csv

	begin wavelet_shards_merge
	step wavelet "${B[@]}" --stat 'l1=sum(abs(g))' --out w.csv
	local i
	for i in 0 1 2; do step wavelet "${B[@]}" --stat 'l1=sum(abs(g))' --shard "$i/3" --out "s$i.npz"; done
	step merge --out m.csv s0.npz s2.npz s1.npz
	same w.csv m.csv
	end

	begin wavelet_merge_refused
	step wavelet "${B[@]}" --shard 0/2 --out s0.npz -q
	step affinity -n 10 --height 3 --width 3 --shard 1/2 --out a1.npz -q
	step merge --out m.csv s0.npz
	step merge --out m.csv s0.npz a1.npz
	end

	begin wavelet_resume_absent
	step wavelet "${B[@]}" --out w.csv --resume
	end

	begin wavelet_interrupt_resume
	local W=(wavelet --size 24x24x24 --theta 0:pi:60 --phi 0:pi:10 --xi 1:3:4 --batch 2)
	step "${W[@]}" --out ref.csv -q
	interrupt w.csv.ckpt 1500 "${W[@]}" --out w.csv -q
	ENORM=digits step "${W[@]}" --out w.csv -q
	ENORM=digits step "${W[@]}" --out w.csv --resume
	same ref.csv w.csv
	end
}

cases_dot() {
	one dot_interp dot interp --points 1000 --grid 64 --interpolants 12
	one dot_interp_none_f64 dot interp --points 1000 --grid 64 --interpolants 12 --reduce none --dtype float64
	one dot_interp_formula dot interp --points 1000 --grid 64 --interpolants 12 --reduce 'max(v)' --batch 100
	one dot_affinity dot affinity -n 40 --height 6 --width 5 --metric cosine
	one dot_affinity_formula dot affinity -n 40 --height 6 --width 5 --formula 'exp(-sum((a-b)^2)/(2*s^2))' --param s=4
	one dot_affinity_topk dot affinity -n 40 --height 6 --width 5 --topk 5 --block 8
	one dot_drr dot drr --size 24 --detector 12x10 --orbit 4
	one dot_drr_trilinear_post dot drr --size 24 --detector 12x10 --orbit 4 --method trilinear --post 'exp(-p)'
	one dot_wavelet dot wavelet --size 8x8x8
	one dot_wavelet_stats dot wavelet --size 8x8x8 --stat 'l1=sum(abs(g))' --boundary wrap
	local w
	for w in interp drr wavelet; do one "dot_defaults_$w" dot "$w"; done
	one dot_defaults_affinity_n300 dot affinity -n 300
}

cases_misc() {
	begin info
	NORM=info step info
	end
	begin demo
	NORM=demo step demo
	end
	one version --version
	one help_top --help
	local c
	for c in interp affinity drr wavelet merge demo dot info; do one "help_$c" "$c" --help; done
}

cases_bad() {
	local I=$INPUTS
	one bad_unknown_command frob
	one bad_unknown_flag interp --nope
	one bad_missing_file interp -f "$I/missing.npy" -x "$I/x.npy"
	one bad_garbage_npy affinity --images "$I/garbage.npy"
	one bad_complex_npy affinity --images "$I/complex.npy"
	one bad_one_d_images affinity --images "$I/one_d.npy"
	one bad_nan_table interp -f "$I/f_with_nan.npy" -x "$I/x.npy"
	one bad_reduce_parse interp --points 10 --reduce 'max('
	one bad_reduce_unreduced interp --points 10 --reduce 'log(v)'
	one bad_reduce_unknown_name interp --points 10 --reduce 'k*max(v)'
	one bad_param_syntax interp --points 10 --reduce 'k*max(v)' --param k
	one bad_param_unused interp --points 10 --param k=1
	one bad_formula_affinity affinity -n 4 --formula 'sum(a*'
	one bad_dtype interp --points 10 --dtype float16
	one bad_metric affinity -n 4 --metric foo
	one bad_shard affinity -n 4 --shard 3/2 --out x.npz
	one bad_shard_no_out affinity -n 4 --shard 0/2
	one bad_topk_out_npy affinity -n 4 --topk 2 --out t.npy
	one bad_detector drr --size 8 --detector 0x5
	one bad_drr_method drr --size 8 --method foo
	one bad_geometry_pose drr --size 8 --geometry "$I/geom_bad.json"
	one bad_geometry_trailing drr --size 8 --geometry "$I/geom_trailing.json"
	one bad_geometry_missing_file drr --size 8 --geometry "$I/nope.json"
	one bad_geometry_with_orbit drr --size 8 --geometry "$I/geom.json" --orbit 3
	one bad_raw_no_shape drr --volume "$I/vol_hu.raw"
	one bad_png_no_out drr --size 8 --png
	one bad_spacing drr --size 8 --spacing 1,0,1
	one bad_xi wavelet --size 4x4x4 --xi 0
	one bad_theta wavelet --size 4x4x4 --theta a:b
	one bad_boundary wavelet --size 4x4x4 --boundary mirror
	one bad_stat wavelet --size 4x4x4 --stat nope
	one bad_kernel wavelet --size 4x4x4 --kernel 'q+'
	one bad_wavelet_size wavelet --size 4x4
	one bad_mem_limit interp --points 10 --mem-limit lots
	one bad_mem_too_small affinity -n 40 --height 6 --width 5 --mem-limit 1KiB
	one bad_batch interp --points 10 --batch -1
	one bad_device interp --points 10 --device tpu
	one bad_cuda interp --points 10 --device cuda
	one bad_merge_no_out merge x.npz
	one bad_merge_no_files merge --out m.npy
	one bad_merge_missing_file merge --out m.npy nope.npz
	one bad_merge_not_npz merge --out m.npy "$I/x.npy"
	one bad_dot_unknown dot frob
	one bad_affinity_images_missing affinity --images "$I/nope.npy"
	one bad_volume_missing wavelet --volume "$I/nope.npy"
}

case_python() {
	begin python
	N=1
	local e=$IO/python.err rc
	(cd "$D" && PYTHONPATH=$PYDIR${PYTHONPATH:+:$PYTHONPATH} timeout 600 "$PYTHON" "$HERE/compare_outputs_py.py" python "$D/results.txt" "$INPUTS") \
		>"$IO/python.out" 2>"$e" </dev/null
	rc=$?
	record "$rc" "$IO/python.out" "$e" python3 compare_outputs_py.py python results.txt "$INPUTS"
	{
		echo "results:"
		[ -f "$D/results.txt" ] && indent <"$D/results.txt"
	} >>"$CF"
}

# ---------------------------------------------------------------- modes

run_all() {
	BIN=$(readlink -f "$1")
	PYDIR=$2
	OUT=$3
	[ -x "$BIN" ] || { echo "compare-outputs: $1: not an executable" >&2; exit 2; }
	if [ "$PYDIR" != - ]; then
		PYDIR=$(readlink -f "$PYDIR")
		[ -f "$PYDIR/tapeloop/libtapeloop.so" ] || { echo "compare-outputs: $PYDIR/tapeloop/libtapeloop.so: missing (build it: scripts/compare-outputs.sh build SRC BIN)" >&2; exit 2; }
	fi
	command -v jq >/dev/null || { echo "compare-outputs: jq not found" >&2; exit 2; }
	"$PYTHON" -c 'import numpy' || { echo "compare-outputs: $PYTHON has no NumPy" >&2; exit 2; }
	mkdir -p "$OUT"
	OUT=$(readlink -f "$OUT")
	CASES=$OUT/cases WORK=$OUT/work IO=$OUT/io
	rm -rf "$CASES" "$WORK" "$IO"
	mkdir -p "$CASES" "$WORK" "$IO"
	[ -d "$INPUTS" ] || "$PYTHON" "$HERE/compare_outputs_py.py" inputs "$INPUTS" || exit 2
	INPUTS=$(readlink -f "$INPUTS")

	export TAPELOOP_MEM_LIMIT=1GiB GOMAXPROCS=2 LC_ALL=C.UTF-8
	unset TAPELOOP_DEVICE TAPELOOP_DEVICES TAPELOOP_LIB SLURM_ARRAY_TASK_ID JOB_COMPLETION_INDEX
	NAMES=()
	local t0=$SECONDS D=$WORK
	{
		echo "case _inputs"
		(cd "$INPUTS" && sha256sum -- * | sed 's/^/  /')
	} >"$CASES/_inputs.txt"
	cases_interp
	cases_affinity
	cases_drr
	cases_wavelet
	cases_dot
	cases_misc
	cases_bad
	npz_members
	[ "$PYDIR" != - ] && case_python
	echo "$BIN" >"$OUT/binary"
	echo "${#NAMES[@]} cases into $CASES in $((SECONDS - t0)) s (binary $BIN, python ${PYDIR})"
}

compare_dirs() {
	local A=$1/cases B=$2/cases n same=0 diffs=0 only=0 f
	[ -d "$A" ] && [ -d "$B" ] || { echo "compare-outputs: want two output directories of 'run'" >&2; exit 2; }
	local names
	names=$( (cd "$A" && ls) ; (cd "$B" && ls) )
	names=$(echo "$names" | LC_ALL=C sort -u)
	local differing=()
	printf '%-44s %s\n' "case" "result"
	printf '%-44s %s\n' "----" "------"
	for f in $names; do
		n=${f%.txt}
		if [ ! -f "$A/$f" ]; then
			printf '%-44s %s\n' "$n" "only in B"; only=$((only + 1))
		elif [ ! -f "$B/$f" ]; then
			printf '%-44s %s\n' "$n" "only in A"; only=$((only + 1))
		elif cmp -s "$A/$f" "$B/$f"; then
			printf '%-44s %s\n' "$n" "identical"; same=$((same + 1))
		else
			printf '%-44s %s\n' "$n" "DIFFERS"; diffs=$((diffs + 1)); differing+=("$f")
		fi
	done
	echo
	echo "identical: $same, differs: $diffs, only in one: $only  (A = $1, B = $2)"
	for f in "${differing[@]}"; do
		echo
		echo "=== ${f%.txt}"
		diff -u --label "A/${f}" --label "B/${f}" "$A/$f" "$B/$f" | head -n "${DIFF_LINES:-80}"
	done
	[ "$diffs" = 0 ] && [ "$only" = 0 ]
}

build_tree() {
	local src=$1 bin=$2
	(cd "$src" && go build -o "$bin" ./cmd/tapeloop && go build -buildmode=c-shared -o python/tapeloop/libtapeloop.so ./capi) &&
		echo "built $bin and $src/python/tapeloop/libtapeloop.so"
}

case "${1:-}" in
run) [ $# = 4 ] || usage; run_all "$2" "$3" "$4" ;;
compare) [ $# = 3 ] || usage; compare_dirs "$2" "$3" ;;
build) [ $# = 3 ] || usage; build_tree "$(readlink -f "$2")" "$(readlink -f "$3")" ;;
*) usage ;;
esac
