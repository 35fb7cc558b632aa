#!/usr/bin/env bash
# Builds the corpus that benchmarks/corpus/run.sh and benchmarks/corpus_check.py lint:
# 28 PyTorch packages unpacked from their wheels (sdists for mmcv, fairseq and deepspeed),
# one folder per package holding only its Python source tree(s):
#
#   $CORPUS/<pkg>/<top-level import package>/...     e.g. /work/corpus/espnet/espnet2/layers/log_mel.py
#   $CORPUS/MANIFEST.txt                             package  version  kind  python_files  lines  sha256  file
#
# python_files and lines count the .py files outside hidden folders (amp-lint skips those; the
# mm* wheels keep 3,158 config files under .mim/): 13,039 files, 4,177,763 lines in all, the
# figures docs/accuracy.md and docs/reliability.md give.
#
#   build.sh [PKG ...]        (default: every package below; re-running rebuilds the named ones)
#
# Environment: CORPUS (default /work/corpus), CACHE (download cache, default
# /work/corpus-build/downloads; files already there are reused after their sha256 is checked
# against PyPI's), PYTHON (default python3).
#
# Versions are pinned below. transformers 5.23.0, diffusers 0.42.1 and timm 1.0.31 are the pins
# of benchmarks/bench.py (docs/performance.md); torchmetrics 1.9.0 is the one tests/test_claims.py
# names; the others are the newest release on PyPI that installs on Python 3.11 (espnet 202511:
# its 2026 releases need Python >= 3.12), which the corpus's first run (2026-11-24) also saw; except torchvision, which is capped at 0.29.1 by this machine's pip constraints file
# (/etc/xdg/pip/constraints.txt), as a plain `pip download torchvision` got it. Wheels come from
# `pip download --no-deps --only-binary :all:` (the constraints file is bypassed so that the pin
# decides); sdists straight from PyPI's file URL (pip download would build their metadata, which
# needs torch), each checked against PyPI's sha256.
#
# Kept from a wheel: every top-level entry except *.dist-info and *.data. Kept from an sdist: the
# folders named in its row (the import packages; not tests, docs, examples, setup.py or C++ sources
# outside them).
set -euo pipefail
CORPUS=${CORPUS:-/work/corpus}
CACHE=${CACHE:-/work/corpus-build/downloads}
PYTHON=${PYTHON:-python3}

# package  version  kind  [sdist: folders to keep, comma-separated]
PINS='
accelerate             1.15.0      wheel
deepspeed              0.19.8      sdist  deepspeed
diffusers              0.42.1      wheel
espnet                 202511      wheel
fairseq                0.12.2      sdist  fairseq,fairseq_cli
fastai                 2.8.12      wheel
kornia                 0.9.0       wheel
lightning              2.6.6       wheel
mmcv                   2.2.0       sdist  mmcv
mmdet                  3.3.0       wheel
mmengine               0.10.7      wheel
mmpose                 1.3.2       wheel
mmpretrain             1.2.0       wheel
mmsegmentation         1.2.2       wheel
monai                  1.6.1       wheel
nemo_toolkit           3.0.0       wheel
open_clip_torch        3.3.0       wheel
peft                   0.21.2      wheel
sentence-transformers  6.2.0       wheel
speechbrain            1.1.2       wheel
timm                   1.0.31      wheel
torch_geometric        2.8.1       wheel
torchaudio             2.11.1      wheel
torchmetrics           1.9.0       wheel
torchvision            0.29.1      wheel
transformers           5.23.0      wheel
trl                    1.16.0      wheel
ultralytics            8.4.190     wheel
'

mkdir -p "$CORPUS" "$CACHE"
CACHE=$(cd "$CACHE" && pwd)
CORPUS=$(cd "$CORPUS" && pwd)
want=("$@")

# PyPI's record of one file: "<filename> <sha256> <url>" (kind wheel: the wheel pip would pick here)
pypi_file() {
  "$PYTHON" - "$1" "$2" "$3" <<'EOF'
import json, sys, urllib.parse, urllib.request
from pip._internal.models.index import PyPI  # the default index's JSON API, as pip knows it
name, version, kind = sys.argv[1:]
index = f"{PyPI.pypi_url}/{name}/json"
with urllib.request.urlopen(index, timeout=120) as r:
    files = json.load(r)["releases"].get(version) or []
if kind == "sdist":
    files = [f for f in files if f["packagetype"] == "sdist"]
else:
    files = [f for f in files if f["packagetype"] == "bdist_wheel"
             and (f["filename"].endswith("-any.whl") or "manylinux" in f["filename"] and "x86_64" in f["filename"])]
    py = [f for f in files if "-none-" in f["filename"] or "-cp311-" in f["filename"]]
    files = py or files
if not files:
    sys.exit(f"no {kind} of {name} {version} on PyPI")
f = files[0]
print(f["filename"], f["digests"]["sha256"], urllib.parse.urljoin(index, f["url"]))
EOF
}

sha() { sha256sum "$1" | cut -d' ' -f1; }

fetch() {  # name version kind -> path of the verified file in $CACHE
  local name=$1 version=$2 kind=$3 file digest url
  read -r file digest url < <(pypi_file "$name" "$version" "$kind") || true
  [ -n "${file:-}" ] || { echo "build.sh: $name $version: not found on PyPI" >&2; return 1; }
  if [ -f "$CACHE/$file" ] && [ "$(sha "$CACHE/$file")" = "$digest" ]; then echo "$CACHE/$file"; return; fi
  rm -f "$CACHE/$file"
  if [ "$kind" = wheel ]; then
    PIP_CONSTRAINT=/dev/null "$PYTHON" -m pip download -q --no-deps --only-binary :all: \
      --dest "$CACHE" "$name==$version" >&2 2> >(grep -v "is ignored: it is neither" >&2)
  else
    curl -sS --fail -L -o "$CACHE/$file.part" "$url" && mv "$CACHE/$file.part" "$CACHE/$file"
  fi
  [ -f "$CACHE/$file" ] || { echo "build.sh: $name $version: pip did not leave $file" >&2; return 1; }
  [ "$(sha "$CACHE/$file")" = "$digest" ] || { echo "build.sh: $file: sha256 differs from PyPI's" >&2; return 1; }
  echo "$CACHE/$file"
}

manifest_row() {  # pkg version kind sha file
  local dir=$CORPUS/$1 files lines
  # the files amp-lint lints: hidden folders (the mm* wheels' .mim/configs) are skipped by it
  files=$(find "$dir" -name '*.py' -type f -not -path '*/.*/*' | wc -l)
  lines=$(find "$dir" -name '*.py' -type f -not -path '*/.*/*' -print0 | xargs -0 cat | wc -l)
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$files" "$lines" "$4" "$5"
}

ROWS=$CORPUS/.rows
touch "$ROWS"
while read -r pkg version kind keep; do
  [ -n "$pkg" ] || continue
  if [ ${#want[@]} -gt 0 ] && ! printf '%s\n' "${want[@]}" | grep -qxF "$pkg"; then continue; fi
  echo "[$(date -u +%T)] $pkg $version ($kind)" >&2
  path=$(fetch "$pkg" "$version" "$kind")
  tmp=$CORPUS/.tmp-$pkg
  rm -rf "$tmp" "$CORPUS/.new-$pkg"
  mkdir -p "$tmp" "$CORPUS/.new-$pkg"
  if [ "$kind" = wheel ]; then
    "$PYTHON" -m zipfile -e "$path" "$tmp"
    for entry in "$tmp"/* "$tmp"/.[!.]*; do
      [ -e "$entry" ] || continue
      case $(basename "$entry") in *.dist-info|*.data) continue ;; esac
      mv "$entry" "$CORPUS/.new-$pkg/"
    done
  else
    tar -xzf "$path" -C "$tmp"
    root=$(find "$tmp" -mindepth 1 -maxdepth 1 -type d | head -1)
    IFS=, read -r -a folders <<< "$keep"
    for f in "${folders[@]}"; do
      [ -d "$root/$f" ] || { echo "build.sh: $pkg: no folder $f in the sdist" >&2; exit 1; }
      mv "$root/$f" "$CORPUS/.new-$pkg/"
    done
  fi
  rm -rf "$tmp" "$CORPUS/$pkg"
  mv "$CORPUS/.new-$pkg" "$CORPUS/$pkg"
  grep -v -P "^\Q$pkg\E\t" "$ROWS" > "$ROWS.tmp" || true
  manifest_row "$pkg" "$version" "$kind" "$(sha "$path")" "$(basename "$path")" >> "$ROWS.tmp"
  mv "$ROWS.tmp" "$ROWS"
done <<< "$PINS"

{
  printf '# built by benchmarks/corpus/build.sh, last run %s\n' "$(date -u +%FT%TZ)"
  printf '# package\tversion\tkind\tpython_files\tlines\tsha256\tfile\n'
  sort "$ROWS"
  awk -F'\t' '{f += $4; l += $5} END {printf "TOTAL\t\t\t%d\t%d\n", f, l}' "$ROWS"
} > "$CORPUS/MANIFEST.txt"
cat "$CORPUS/MANIFEST.txt"
