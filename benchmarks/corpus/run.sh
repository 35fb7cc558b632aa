#!/usr/bin/env bash
# Re-runnable corpus runs of amp-lint, one run per package (each package is its own project).
#
#   run.sh <amp-lint-binary> <output-dir> <mode> [PKG ...]
#
#   mode: default  -> amp-lint check --no-cache --exit-zero /work/corpus/<pkg>
#         library  -> the same plus --assume-autocast float16
#   PKG:  package folder names under $CORPUS (default: every package in $CORPUS/MANIFEST.txt)
#
# Writes <output-dir>/<pkg>.txt (stdout), <pkg>.err (stderr), <pkg>.time (/usr/bin/time -v)
# and appends one row per package to <output-dir>/times.tsv:
#   package  mode  wall_s  user_s  sys_s  max_rss_kb  exit_status  timed_out  findings
# Runs from a neutral cwd (/tmp). Each run is stopped after $TIMEOUT_S seconds
# (default: 1500 = 25 min in library mode, none in default mode); timed_out=yes then.
# Baseline was made with:
#   run.sh /work/baseline/.venv/bin/amp-lint /work/corpus-results/baseline-default default
#   run.sh /work/baseline/.venv/bin/amp-lint /work/corpus-results/baseline-library library
set -u
BIN=$(readlink -f "${1:?amp-lint binary}")
OUT=$(mkdir -p "${2:?output dir}" && cd "$2" && pwd)
MODE=${3:?mode: default or library}
shift 3
CORPUS=${CORPUS:-/work/corpus}
case $MODE in
  default) EXTRA=(); TIMEOUT_S=${TIMEOUT_S:-0} ;;
  library) EXTRA=(--assume-autocast float16); TIMEOUT_S=${TIMEOUT_S:-1500} ;;
  *) echo "mode must be default or library" >&2; exit 2 ;;
esac
if [ $# -gt 0 ]; then PKGS=("$@"); else
  mapfile -t PKGS < <(awk -F'\t' '!/^#/ && $1 != "TOTAL" && NF >= 5 {print $1}' "$CORPUS/MANIFEST.txt")
fi
[ -f "$OUT/times.tsv" ] || printf 'package\tmode\twall_s\tuser_s\tsys_s\tmax_rss_kb\texit_status\ttimed_out\tfindings\n' > "$OUT/times.tsv"
{ echo "# $(date -u +%FT%TZ) bin=$BIN mode=$MODE"; "$BIN" --version; git -C "$(dirname "$BIN")/../.." rev-parse HEAD 2>/dev/null; } >> "$OUT/RUNINFO.txt" 2>&1
cd /tmp
for pkg in "${PKGS[@]}"; do
  echo "[$(date -u +%T)] $MODE $pkg" >&2
  /usr/bin/time -v -o "$OUT/$pkg.time" timeout -s TERM "$TIMEOUT_S" \
    "$BIN" check --no-cache --exit-zero "${EXTRA[@]}" "$CORPUS/$pkg" \
    > "$OUT/$pkg.txt" 2> "$OUT/$pkg.err"
  rc=$?
  t() { grep -F "$1" "$OUT/$pkg.time" | awk -F': ' '{print $NF}'; }
  wall=$(t 'Elapsed (wall clock)' | awk -F: '{ if (NF==3) print $1*3600+$2*60+$3; else print $1*60+$2 }')
  to=no; [ "$rc" = 124 ] && to=yes
  # a finding line is "path:line:col: CODE message"
  n=$(grep -cE '^[^ ].*:[0-9]+:[0-9]+: [A-Z]+[0-9]+' "$OUT/$pkg.txt")
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$pkg" "$MODE" "$wall" "$(t 'User time')" "$(t 'System time')" \
    "$(t 'Maximum resident')" "$rc" "$to" "$n" >> "$OUT/times.tsv"
done
