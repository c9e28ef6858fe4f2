#!/bin/sh
# The scale curve of docs/performance.md, regenerated in one command sequence:
#   sh bench/scale_curve.sh [OUT_DIR]
# One bench_scale.py run per size (clustered data, made once under $DATA and reused, exact truths
# included), the IVF-PQ comparison at 100k, then plot_scale.py over the runs. Heavy: 1M x 384
# takes ~20 minutes of a quiet core (two HNSW builds of ~6-7 minutes each); set SIZES="10000 100000" to leave it out.
# Runs niced; report `uptime` with the figures (each JSON records the load at its start and end).
set -eu
OUT=${1:-/tmp/scale_curve}
DATA=${DATA:-/tmp/bench_scale_data}
SIZES=${SIZES:-"10000 100000 1000000"}
PY=${PYTHON:-python}
mkdir -p "$OUT"
runs=""
for n in $SIZES; do
    case $n in
        10000) name=10k; systems=memcore:exact,memcore:faiss,raw:numpy,raw:faiss,chroma,lancedb; extra="--reopens 2 --queries 30" ;;
        100000) name=100k; systems=memcore:exact,memcore:faiss,raw:numpy,raw:faiss,chroma,lancedb; extra="--reopens 2 --queries 30 --build-budget 1800" ;;
        1000000) name=1m; systems=memcore:exact,memcore:faiss,raw:numpy,raw:faiss,lancedb; extra="--reopens 3 --queries 20 --build-budget 2700" ;;
        *) echo "sizes: 10000 100000 1000000" >&2; exit 2 ;;
    esac
    nice -n 5 "$PY" bench/bench_scale.py --n "$n" --data clustered --systems "$systems" $extra \
        --cache "$DATA" --out "$OUT/scale_$name.json"
    runs="$runs $OUT/scale_$name.json"
done
# IVF-PQ at 100k: memcore's IVF-PQ configuration (refine_k_factor at its default), raw faiss with the same factory
# and the same re-scoring, and LanceDB IVF_PQ at its defaults
nice -n 5 "$PY" bench/bench_scale.py --n 100000 --data clustered --systems memcore:ivfpq,raw:ivfpq,lancedb:ivfpq \
    --ivfpq "${IVFPQ:-IVF256,PQ48}" --nprobe "${NPROBE:-8}" --reopens 2 --queries 30 --cache "$DATA" \
    --out "$OUT/scale_100k_ivfpq.json"
"$PY" bench/plot_scale.py $runs --json docs/assets/scale_curve.json --png docs/assets/scale_curve.png
for f in $runs "$OUT/scale_100k_ivfpq.json"; do cp "$f" docs/assets/; done
