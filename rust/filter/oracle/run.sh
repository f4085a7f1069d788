#!/usr/bin/env bash
# Differential test of rmq-filter against RocketMQ's own Java filter.
#
#   ROCKETMQ_SRC=/path/to/rocketmq (checked out at rocketmq-all-4.9.8) \
#   GUAVA_JAR=/usr/share/java/guava.jar  rust/filter/oracle/run.sh [seed] [count]
#
# Needs a JDK (javac, java) and Guava (Debian: libguava-java). Prints the mismatch count
# against the unpatched reference (the documented deviations) and against the patched one
# (must be 0).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
seed=${1:-1}
count=${2:-20000}
: "${ROCKETMQ_SRC:?set ROCKETMQ_SRC to a RocketMQ 4.9.8 checkout}"
guava=${GUAVA_JAR:-/usr/share/java/guava.jar}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

build() { # $1 = output dir, $2 = patch or not
    local src="$work/src-$1"
    mkdir -p "$src" "$work/$1"
    cp -r "$ROCKETMQ_SRC/filter/src/main/java/." "$src/"
    rm -f "$src"/org/apache/rocketmq/filter/{SqlFilter,FilterFactory,FilterSpi}.java
    if [ "$2" = patch ]; then
        python3 "$here/patch_reference.py" "$src/org/apache/rocketmq/filter"
    fi
    javac -nowarn -encoding UTF-8 -cp "$guava" -d "$work/$1" \
        $(find "$src" -name '*.java') "$here/Oracle.java" 2>&1 | grep -v '^Note' || true
}
build plain no
build patched patch
(cd "$root" && cargo build -q --offline -p rmq-filter --example oracle)
python3 "$here/gen.py" "$seed" "$count" > "$work/in.txt"
"$root/target/debug/examples/oracle" < "$work/in.txt" > "$work/rust.txt"
for ref in plain patched; do
    java -cp "$work/$ref:$guava" Oracle < "$work/in.txt" > "$work/$ref.txt"
    n=$(paste "$work/$ref.txt" "$work/rust.txt" | awk -F'\t' '$1 != $2' | wc -l)
    echo "$ref reference: $n mismatches of $count"
done
paste "$work/patched.txt" "$work/rust.txt" "$work/in.txt" | awk -F'\t' '$1 != $2' | head -20
