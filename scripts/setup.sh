#!/usr/bin/env bash
# KernelFoundry-rs: install GPU/CPU kernel runtimes into a project-local, git-ignored folder.
#
#   scripts/setup.sh              # same as --opencl
#   scripts/setup.sh --opencl     # Intel CPU OpenCL runtime from PyPI (no root needed)
#   scripts/setup.sh --pocl       # Debian's PoCL OpenCL driver + ICD loader (needs root/sudo)
#   scripts/setup.sh --sycl       # the DPC++ SYCL runtime from PyPI (intel-sycl-rt: headers,
#                                 # libsycl, the run-time SYCL compiler; 210 MB download, 0.7 GB
#                                 # on disk) plus the OpenCL runtime above when missing (its CPU
#                                 # device); kf-backend-sycl builds its shim with g++
#   scripts/setup.sh --cuda       # NVRTC 12.9 + CUDA runtime headers from PyPI (no root and no
#                                 # GPU needed; 95 MB download, 230 MB on disk): CUDA kernels
#                                 # compile and report resources anywhere, run where a GPU is
#   scripts/setup.sh --opencl --cuda   # both
#   scripts/setup.sh --torch      # PyTorch (CPU use) into the same venv, for KernelBench references
#                                 # that run the unchanged problem files: PyPI's only Linux x86-64
#                                 # torch is the CUDA build, which does not import without its
#                                 # NVIDIA wheels, so this is about 1.5 GB of download and 5.4 GB
#                                 # on disk (measured: torch 2.15.0+cu132, 154 s here). Optional:
#                                 # without it the KernelBench tasks use their NumPy references.
#   scripts/setup.sh --numpy      # only NumPy in the venv, for task files' Python references
#                                 # (every other mode installs it as well; about 20 MB)
#   scripts/setup.sh --pyopencl   # pyopencl and pytest in the venv, for the Python modules
#                                 # `kf export --python` writes and their tests (a few MB)
#   scripts/setup.sh --browser    # Debian's chromium for the run explorer's browser tests
#                                 # (apt-get, needs root/sudo; nothing when one is installed)
#
# Options:
#   --runtime-dir DIR   where to install (default: <repo>/.runtime)
#   --python PY         the Python used to create the virtual environment (default: python3)
#   --upgrade           re-run pip even when the packages are already installed
#   --probe-only        do not install anything; rewrite the config files and probe
#   -h, --help          this text
#
# What it writes (idempotent; run it again at any time):
#   .runtime/venv/                        virtual environment holding the PyPI wheels and NumPy
#                                         (the Python that task-file references run in)
#   .runtime/opencl/vendors/intel-cpu.icd one line: the absolute path of libintelocl.so
#                                         (the wheel's own .icd names a placeholder path)
#   .runtime/opencl.json                  machine-readable: what kf-backend-opencl reads to find
#                                         the runtime with no environment variable set by hand
#   .runtime/env.d/opencl.sh, .runtime/env.sh
#                                         `source .runtime/env.sh` for other tools (clinfo,
#                                         Python): OCL_ICD_VENDORS, LD_LIBRARY_PATH,
#                                         OPENCL_DYLIB_PATH
#   .runtime/sycl.json, .runtime/env.d/sycl.sh, .runtime/sycl/probe
#                                         (--sycl) headers and library directory read by
#                                         kf-backend-sycl's build script, the OpenCL vendors dir,
#                                         and a probe that built and ran a kernel from source
#   .runtime/cuda.json, .runtime/env.d/cuda.sh
#                                         (--cuda) absolute paths of libnvrtc.so.12, its builtins
#                                         and the CUDA headers, read by kf-backend-cuda
#
# The default path needs no root: everything lives under the runtime dir. It needs PyPI access
# and about 0.9 GB of disk. Which packages, at which versions: kf-setup/runtimes.toml, which
# `kf setup` reads too (it installs the same into the per-user folder, for an installed kf).
set -euo pipefail

LOG_TAG=setup
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
UPGRADE=0
PROBE_ONLY=0
WANT_OPENCL=0
WANT_POCL=0
WANT_SYCL=0
WANT_CUDA=0
WANT_TORCH=0
WANT_NUMPY=0
WANT_PYOPENCL=0
WANT_BROWSER=0

# What to install: kf-setup/runtimes.toml, the one description this script and `kf setup`
# (which installs the same packages into the per-user folder) both read. Read with Python's
# tomllib (3.11+), or, on an older Python, a reader of the file's plain subset (a
# [runtime.NAME] table whose `packages` array holds one quoted requirement a line).
RUNTIMES_TOML="$ROOT/kf-setup/runtimes.toml"

# described_packages NAME: the pip requirements of runtime NAME, one a line.
described_packages() {
    "$PYTHON" - "$RUNTIMES_TOML" "$1" <<'PY' || die "cannot read runtime '$1' from $RUNTIMES_TOML"
import re, sys
path, name = sys.argv[1:3]
text = open(path, encoding="utf-8").read()
try:
    import tomllib
    packages = tomllib.loads(text)["runtime"][name]["packages"]
except ImportError:
    table = re.search(r"^\[runtime\." + re.escape(name) + r"\]\s*$(.*?)(?=^\[|\Z)", text, re.M | re.S)
    array = table and re.search(r"^packages\s*=\s*\[(.*?)\]", table.group(1), re.M | re.S)
    if not array:
        sys.exit(f"no [runtime.{name}] with packages in {path}")
    packages = re.findall(r'"([^"]+)"', re.sub(r"#[^\n]*", "", array.group(1)))
print("\n".join(packages))
PY
}

# package_names REQUIREMENT...: the distribution names, without `==VERSION`.
package_names() {
    local r
    for r in "$@"; do printf '%s\n' "${r%%==*}"; done
}

mapfile -t OPENCL_PACKAGES < <(described_packages opencl)
mapfile -t CUDA_PACKAGES < <(described_packages cuda)
mapfile -t SYCL_PACKAGES < <(described_packages sycl)
mapfile -t NUMPY_PACKAGES < <(described_packages numpy)
mapfile -t PYOPENCL_PACKAGES < <(described_packages pyopencl)
[ "${#OPENCL_PACKAGES[@]}" -gt 0 ] && [ "${#CUDA_PACKAGES[@]}" -gt 0 ] &&
    [ "${#SYCL_PACKAGES[@]}" -gt 0 ] && [ "${#NUMPY_PACKAGES[@]}" -gt 0 ] ||
    die "cannot read the runtimes from $RUNTIMES_TOML"
mapfile -t OPENCL_NAMES < <(package_names "${OPENCL_PACKAGES[@]}")
mapfile -t NUMPY_NAMES < <(package_names "${NUMPY_PACKAGES[@]}")
mapfile -t PYOPENCL_NAMES < <(package_names "${PYOPENCL_PACKAGES[@]}")
# The CUDA series (12.9) of the NVRTC requirement (nvidia-cuda-nvrtc-cu12==12.9.*); it must
# match kf-backend-cuda's cudarc feature (cuda-12090).
CUDA_SERIES="${CUDA_PACKAGES[0]#*==}"
CUDA_SERIES="${CUDA_SERIES%.\*}"

pocl_hint() {
    cat >&2 <<'EOF'
[setup] Fallback without PyPI: the PoCL CPU driver from Debian (slower, fine for correctness):
[setup]     sudo apt-get update && sudo apt-get install -y pocl-opencl-icd ocl-icd-libopencl1
[setup] (or: scripts/setup.sh --pocl). kf-backend-opencl then finds the system libOpenCL.so.1.
EOF
}

parse_args() {
    while [ $# -gt 0 ]; do
        case "$1" in
        --opencl) WANT_OPENCL=1 ;;
        --pocl) WANT_POCL=1 ;;
        --sycl) WANT_SYCL=1 ;;
        --cuda) WANT_CUDA=1 ;;
        --torch) WANT_TORCH=1 ;;
        --numpy) WANT_NUMPY=1 ;;
        --pyopencl) WANT_PYOPENCL=1 ;;
        --browser) WANT_BROWSER=1 ;;
        --runtime-dir)
            need_value $# --runtime-dir
            RUNTIME="$2"
            shift
            ;;
        --runtime-dir=*) RUNTIME="${1#*=}" ;;
        --python)
            need_value $# --python
            PYTHON="$2"
            shift
            ;;
        --python=*) PYTHON="${1#*=}" ;;
        --upgrade) UPGRADE=1 ;;
        --probe-only) PROBE_ONLY=1 ;;
        *) help_or_unknown "$1" ;;
        esac
        shift
    done
    if [ $((WANT_OPENCL + WANT_POCL + WANT_SYCL + WANT_CUDA + WANT_TORCH + WANT_NUMPY + WANT_PYOPENCL + WANT_BROWSER)) -eq 0 ]; then
        WANT_OPENCL=1
    fi
    mkdir -p "$RUNTIME"
    RUNTIME="$(cd "$RUNTIME" && pwd)"
    VENV="$RUNTIME/venv"
}

# ---------------------------------------------------------------------------------------------
# Python environment

# Creates the virtual environment (once) and sets VPY to its interpreter.
ensure_venv() {
    VPY="$VENV/bin/python"
    if [ -x "$VPY" ] && "$VPY" -m pip --version >/dev/null 2>&1; then
        return 0
    fi
    command -v "$PYTHON" >/dev/null 2>&1 ||
        die "no '$PYTHON' found: install Python 3 (Debian: apt-get install python3 python3-venv)"
    log "creating virtual environment $VENV"
    rm -rf "$VENV"
    if ! "$PYTHON" -m venv "$VENV" >&2; then
        rm -rf "$VENV"
        die "'$PYTHON -m venv' failed (Debian: apt-get install python3-venv), or pass --python"
    fi
    "$VPY" -m pip --version >/dev/null 2>&1 || die "the virtual environment has no pip"
}

# True when every named distribution is installed in the venv.
# Whether every named package is installed: `pip show a b` succeeds when any one of them is.
venv_has() {
    local package
    for package in "$@"; do
        "$VPY" -m pip show "$package" >/dev/null 2>&1 || return 1
    done
}

pip_install() {
    log "pip install $* (large download, ${PIP_SIZE:-about 0.8 GB}; progress in $RUNTIME/pip.log)"
    if ! "$VPY" -m pip install --disable-pip-version-check --upgrade "$@" >"$RUNTIME/pip.log" 2>&1; then
        tail -n 15 "$RUNTIME/pip.log" >&2 || true
        warn "pip install $* failed (see $RUNTIME/pip.log): no PyPI access, no wheel for this platform ($(uname -m)), or disk full"
        return 1
    fi
}

# ---------------------------------------------------------------------------------------------
# pyopencl and pytest: the Python modules `kf export --python` writes, and their tests.

setup_pyopencl() {
    ensure_venv
    if [ "$PROBE_ONLY" -eq 0 ]; then
        if [ "$UPGRADE" -eq 1 ] || ! venv_has "${PYOPENCL_NAMES[@]}"; then
            PIP_SIZE="a few MB" pip_install "${PYOPENCL_PACKAGES[@]}" || return 1
        else
            log "pyopencl and pytest already installed (--upgrade to update)"
        fi
    fi
    "$VPY" -c 'import pyopencl, pytest, sys; print(f"[setup] pyopencl {pyopencl.VERSION_TEXT} and pytest {pytest.__version__} in {sys.prefix}", file=sys.stderr)' ||
        {
            warn "pyopencl or pytest does not import in $VENV"
            return 1
        }
}

# ---------------------------------------------------------------------------------------------
# NumPy: task files' Python references (`[reference] python = "ref.py"`) run in this venv.

setup_numpy() {
    ensure_venv
    if [ "$PROBE_ONLY" -eq 0 ]; then
        if [ "$UPGRADE" -eq 1 ] || ! venv_has "${NUMPY_NAMES[@]}"; then
            PIP_SIZE="about 20 MB" pip_install "${NUMPY_PACKAGES[@]}" || return 1
        else
            log "numpy already installed (--upgrade to update)"
        fi
    fi
    "$VPY" -c 'import numpy, sys; print(f"[setup] NumPy {numpy.__version__} in {sys.prefix} for task-file Python references", file=sys.stderr)' ||
        {
            warn "NumPy does not import in $VENV"
            return 1
        }
}

# ---------------------------------------------------------------------------------------------
# OpenCL: Intel CPU runtime from PyPI

find_lib() { # find_lib NAME: absolute path of the first file NAME under the venv
    find "$VENV" \( -name "$1" -type f -o -name "$1" -type l \) -not -path '*/site-packages/*' 2>/dev/null |
        head -n 1
}

setup_opencl() {
    ensure_venv
    if [ "$PROBE_ONLY" -eq 0 ]; then
        if [ "$UPGRADE" -eq 1 ] || ! venv_has "${OPENCL_NAMES[@]}"; then
            pip_install "${OPENCL_PACKAGES[@]}" || {
                pocl_hint
                return 1
            }
        else
            log "${OPENCL_PACKAGES[*]} already installed (--upgrade to update)"
        fi
    fi

    local icd_lib loader libdir
    icd_lib="$(find_lib libintelocl.so)"
    [ -n "$icd_lib" ] || {
        warn "libintelocl.so not found under $VENV (is intel-opencl-rt installed?)"
        pocl_hint
        return 1
    }
    icd_lib="$(realpath "$icd_lib")"
    libdir="$(dirname "$icd_lib")"
    # The wheel ships a Khronos ICD loader; it needs the Intel support libraries beside it
    # (libsvml, libirng, libimf, libintlc) and has no RUNPATH, so record them for preloading.
    loader=""
    if [ -e "$libdir/libOpenCL.so.1" ]; then
        loader="$(realpath "$libdir/libOpenCL.so.1")"
    fi

    # Our own vendors directory: the wheel's .icd names a placeholder path, and the wheel's loader
    # accepts only a directory in OCL_ICD_VENDORS. System ICDs (PoCL, GPU drivers) present now
    # are linked in as well, so that they stay visible; run this script again after installing one.
    local vendors="$RUNTIME/opencl/vendors"
    mkdir -p "$vendors"
    find "$vendors" -maxdepth 1 -name '*.icd' -type l -delete
    write_file "$vendors/intel-cpu.icd" printf '%s\n' "$icd_lib"
    local f
    for f in /etc/OpenCL/vendors/*.icd; do
        [ -e "$f" ] || continue
        case "$(basename "$f")" in intel-cpu.icd) continue ;; esac
        ln -sf "$f" "$vendors/system-$(basename "$f")"
    done

    mkdir -p "$RUNTIME/env.d"
    write_file "$RUNTIME/env.d/opencl.sh" cat <<EOF
# Written by scripts/setup.sh --opencl; sourced by .runtime/env.sh.
export OCL_ICD_VENDORS="$vendors"
export LD_LIBRARY_PATH="$libdir\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
export OPENCL_DYLIB_PATH="${loader:-$icd_lib}"
EOF
    write_env_sh

    local probe_json
    probe_json="$(probe_opencl "$loader" "$icd_lib" "$libdir" "$vendors")" || probe_json=""
    write_opencl_json "$loader" "$icd_lib" "$libdir" "$vendors" "$probe_json"
    if [ -z "$probe_json" ]; then
        warn "the OpenCL probe failed: the runtime is installed but did not answer"
        pocl_hint
        return 1
    fi
    log "OpenCL ready: $RUNTIME/opencl.json"
}

# Prints a JSON object {platforms: [{name, version, devices: [{name, type, driver, ...}]}]}
# using only ctypes, through the same loader and .icd as the Rust backend.
probe_opencl() {
    local loader="$1" icd_lib="$2" libdir="$3" vendors="$4"
    OCL_ICD_VENDORS="$vendors" LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
        "$VPY" - "${loader:-$icd_lib}" <<'PY'
import ctypes, json, sys

lib = ctypes.CDLL(sys.argv[1])
u32, u64, vp = ctypes.c_uint32, ctypes.c_uint64, ctypes.c_void_p

def text(fn, obj, param):
    size = ctypes.c_size_t()
    if fn(vp(obj), u32(param), ctypes.c_size_t(0), None, ctypes.byref(size)) != 0:
        return ""
    buf = ctypes.create_string_buffer(size.value)
    fn(vp(obj), u32(param), size, buf, None)
    return buf.value.decode(errors="replace").strip()

def num(fn, obj, param, ctype):
    v = ctype()
    fn(vp(obj), u32(param), ctypes.c_size_t(ctypes.sizeof(v)), ctypes.byref(v), None)
    return v.value

n = u32()
err = lib.clGetPlatformIDs(u32(0), None, ctypes.byref(n))
if err != 0 or n.value == 0:
    print(f"clGetPlatformIDs returned {err}, {n.value} platforms", file=sys.stderr)
    sys.exit(1)
plats = (vp * n.value)()
lib.clGetPlatformIDs(n, plats, None)
out = []
for p in plats:
    pi = lib.clGetPlatformInfo
    entry = {"name": text(pi, p, 0x0902), "vendor": text(pi, p, 0x0903),
             "version": text(pi, p, 0x0901), "devices": []}
    nd = u32()
    if lib.clGetDeviceIDs(vp(p), u64(0xFFFFFFFF), u32(0), None, ctypes.byref(nd)) == 0 and nd.value:
        devs = (vp * nd.value)()
        lib.clGetDeviceIDs(vp(p), u64(0xFFFFFFFF), nd, devs, None)
        di = lib.clGetDeviceInfo
        for d in devs:
            kind = num(di, d, 0x1000, u64)
            entry["devices"].append({
                "name": text(di, d, 0x102B),
                "type": "gpu" if kind & 4 else "cpu" if kind & 2 else "accelerator" if kind & 8 else "other",
                "driver": text(di, d, 0x102D),
                "version": text(di, d, 0x102F),
                "compute_units": num(di, d, 0x1002, u32),
                "max_clock_mhz": num(di, d, 0x100C, u32),
                "global_mem_bytes": num(di, d, 0x101F, u64),
            })
    out.append(entry)
print(json.dumps(out))
PY
}

# write_runtime_json NAME ARGS...: runs the Python program on stdin with ARGS; it sets `data`,
# which goes to $RUNTIME/NAME.json after the fields every runtime file starts with (schema,
# written_by "scripts/setup.sh --NAME", written_at).
write_runtime_json() {
    local name="$1" program
    shift
    program="$(cat)
$RUNTIME_JSON_TAIL"
    KF_RUNTIME_NAME="$name" write_file "$RUNTIME/$name.json" "$VPY" -c "$program" "$@"
}

RUNTIME_JSON_TAIL='
import json, os, sys, time
json.dump({
    "schema": 1,
    "written_by": "scripts/setup.sh --" + os.environ["KF_RUNTIME_NAME"],
    "written_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    **data,
}, sys.stdout, indent=2)
print()'

write_opencl_json() {
    local loader="$1" icd_lib="$2" libdir="$3" vendors="$4" probe="$5"
    local preload=()
    local dep
    # Order matters: each library's own dependencies come first.
    for dep in libintlc.so.5 libirng.so libimf.so libsvml.so; do
        [ -e "$libdir/$dep" ] && preload+=("$libdir/$dep")
    done
    write_runtime_json opencl "$loader" "$icd_lib" "$libdir" "$vendors" "$probe" \
        "${preload[@]}" <<'PY'
import json, sys
loader, icd, libdir, vendors, probe = sys.argv[1:6]
data = {
    "runtime": "intel-opencl-rt",
    "loader": loader or None,
    "icd": icd,
    "lib_dir": libdir,
    "vendors_dir": vendors,
    "preload": sys.argv[6:],
    "platforms": json.loads(probe) if probe else [],
}
PY
}

report_opencl() {
    "$VPY" - "$RUNTIME/opencl.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for p in d.get("platforms", []):
    print(f"[setup] platform: {p['name']} ({p['version']})", file=sys.stderr)
    for dev in p["devices"]:
        gb = dev["global_mem_bytes"] / 2**30
        print(f"[setup]   device: {dev['name']} [{dev['type']}] driver {dev['driver']}, "
              f"{dev['version']}, {dev['compute_units']} compute units, "
              f"{dev['max_clock_mhz']} MHz, {gb:.1f} GiB", file=sys.stderr)
PY
}

# ---------------------------------------------------------------------------------------------
# OpenCL: PoCL from Debian (needs root)

setup_pocl() {
    local sudo=""
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null 2>&1 || die "--pocl needs root (or sudo) for apt-get"
        sudo="sudo"
    fi
    command -v apt-get >/dev/null 2>&1 || die "--pocl needs apt-get (Debian/Ubuntu)"
    log "installing pocl-opencl-icd and ocl-icd-libopencl1 with apt-get"
    $sudo apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq pocl-opencl-icd ocl-icd-libopencl1 >&2
    log "PoCL installed: the system loader libOpenCL.so.1 and /etc/OpenCL/vendors/pocl.icd"
    if [ -f "$RUNTIME/opencl.json" ]; then
        log "re-linking system ICDs into $RUNTIME/opencl/vendors"
        PROBE_ONLY=1 setup_opencl || true
    fi
}

# ---------------------------------------------------------------------------------------------
# Chromium from Debian (needs root): the explorer's browser tests (tests/explorer.rs)

setup_browser() {
    local found
    for found in chromium chromium-browser google-chrome; do
        if command -v "$found" >/dev/null 2>&1; then
            log "browser: $(command -v "$found") is installed"
            return 0
        fi
    done
    local sudo=""
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null 2>&1 || die "--browser needs root (or sudo) for apt-get"
        sudo="sudo"
    fi
    command -v apt-get >/dev/null 2>&1 || die "--browser needs apt-get (Debian/Ubuntu), or set KF_CHROMIUM to a Chromium binary"
    log "installing chromium with apt-get"
    $sudo apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium >&2
    log "browser: $(command -v chromium)"
}

# ---------------------------------------------------------------------------------------------
# SYCL: the DPC++ runtime from PyPI (SYCL headers, libsycl.so, and libsycl-jit.so, the run-time
# SYCL compiler). kf-backend-sycl compiles a small C++ shim against it with the system C++
# compiler and runs SYCL kernels on the devices the runtime sees: here the Intel CPU device of
# the OpenCL runtime (set up first when missing), elsewhere Intel GPUs through Level Zero.

SYCL_PACKAGE=intel-sycl-rt

sycl_hint() {
    cat >&2 <<'EOF'
[setup] kf-backend-sycl needs the SYCL runtime (PyPI intel-sycl-rt, or a oneAPI DPC++ install:
[setup] build with KF_SYCL_RUNTIME=<prefix holding include/sycl/sycl.hpp and lib/libsycl.so>)
[setup] and a C++17 compiler for its shim (Debian: apt-get install g++). Without them it still
[setup] builds, and reports "SYCL runtime not available" when used.
EOF
}

setup_sycl() {
    # The CPU device SYCL uses here comes from the Intel OpenCL runtime.
    if [ "$WANT_OPENCL" -eq 0 ] && [ ! -f "$RUNTIME/opencl.json" ]; then
        log "--sycl: setting up the Intel CPU OpenCL runtime first (the device SYCL runs on here)"
        if setup_opencl; then report_opencl; else return 1; fi
    fi
    ensure_venv
    if [ "$PROBE_ONLY" -eq 0 ]; then
        if [ "$UPGRADE" -eq 1 ]; then
            # Together, so that intel-sycl-rt and the OpenCL runtime keep one compiler runtime.
            PIP_SIZE="about 210 MB more" pip_install "${SYCL_PACKAGES[@]}" "${OPENCL_PACKAGES[@]}" || {
                sycl_hint
                return 1
            }
        elif ! venv_has "$SYCL_PACKAGE"; then
            # The description pins intel-sycl-rt and the compiler runtime it shares with the
            # OpenCL runtime to one release, so pip leaves the OpenCL runtime's libraries alone.
            PIP_SIZE="about 210 MB download, 0.7 GB installed" pip_install "${SYCL_PACKAGES[@]}" || {
                sycl_hint
                return 1
            }
        else
            log "$SYCL_PACKAGE already installed (--upgrade to update)"
        fi
    fi

    local include="$VENV/include" libdir="$VENV/lib" version vendors=""
    if [ ! -f "$include/sycl/sycl.hpp" ] || [ ! -e "$libdir/libsycl.so" ]; then
        warn "sycl/sycl.hpp or libsycl.so not found under $VENV (is $SYCL_PACKAGE installed?)"
        sycl_hint
        return 1
    fi
    version="$("$VPY" -m pip show "$SYCL_PACKAGE" 2>/dev/null | sed -n 's/^Version: //p')"
    [ -d "$RUNTIME/opencl/vendors" ] && vendors="$RUNTIME/opencl/vendors"

    mkdir -p "$RUNTIME/env.d"
    write_file "$RUNTIME/env.d/sycl.sh" cat <<EOF
# Written by scripts/setup.sh --sycl; sourced by .runtime/env.sh (for compiling and running
# your own SYCL host programs; kf-backend-sycl reads sycl.json instead).
export LD_LIBRARY_PATH="$libdir\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
EOF
    # Also tells cargo to rebuild kf-backend-sycl (its build script watches env.sh).
    write_env_sh

    local probe_json=""
    if command -v "${CXX:-g++}" >/dev/null 2>&1; then
        probe_json="$(probe_sycl "$include" "$libdir" "$vendors")" || probe_json=""
    else
        warn "no C++ compiler (${CXX:-g++}): kf-backend-sycl cannot build its shim"
    fi
    write_sycl_json "$version" "$include" "$libdir" "$vendors" "$probe_json"
    if [ -z "$probe_json" ]; then
        warn "the SYCL probe failed: the runtime is installed but did not build and run a kernel"
        sycl_hint
        return 1
    fi
    log "SYCL ready: $RUNTIME/sycl.json (cargo rebuilds kf-backend-sycl with its shim)"
}

# Compiles (once) and runs a small host program against the runtime, exactly as kf-backend-sycl
# will: lists the devices, then builds, runs and checks a free-function kernel from source on
# the first device that can build SYCL. Prints a JSON object.
probe_sycl() {
    local include="$1" libdir="$2" vendors="$3" dir="$RUNTIME/sycl"
    mkdir -p "$dir"
    cat >"$dir/probe.cpp.tmp" <<'CPP'
#define SYCL_DISABLE_FSYCL_SYCLHPP_WARNING 1
#include <sycl/sycl.hpp>
#include <chrono>
#include <iostream>
namespace syclex = sycl::ext::oneapi::experimental;
static std::string esc(std::string s) {
    std::string o;
    for (char c : s) { if (c == '"' || c == '\\') o += '\\'; if (c != '\n') o += c; }
    return o;
}
int main() {
    try {
        std::cout << "{\"runtime\":\"libsycl " << __LIBSYCL_MAJOR_VERSION << "."
                  << __LIBSYCL_MINOR_VERSION << "." << __LIBSYCL_PATCH_VERSION << "\",\"devices\":[";
        sycl::device chosen;
        bool found = false, first = true;
        for (auto& p : sycl::platform::get_platforms()) {
            for (auto d : p.get_devices()) {
                bool can = d.ext_oneapi_can_build(syclex::source_language::sycl);
                auto t = d.get_info<sycl::info::device::device_type>();
                std::cout << (first ? "" : ",") << "{\"name\":\"" << esc(d.get_info<sycl::info::device::name>())
                          << "\",\"platform\":\"" << esc(p.get_info<sycl::info::platform::name>())
                          << "\",\"type\":\"" << (t == sycl::info::device_type::gpu ? "gpu" : t == sycl::info::device_type::cpu ? "cpu" : "other")
                          << "\",\"can_build_sycl\":" << (can ? "true" : "false") << "}";
                first = false;
                if (can && !found) { chosen = d; found = true; }
            }
        }
        std::cout << "]";
        if (!found) { std::cout << ",\"error\":\"no device can build SYCL source\"}\n"; return 1; }
        sycl::queue q{chosen};
        auto t0 = std::chrono::steady_clock::now();
        auto src = syclex::create_kernel_bundle_from_source(q.get_context(), syclex::source_language::sycl,
            std::string("#include <sycl/sycl.hpp>\nextern \"C\" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY("
                        "(sycl::ext::oneapi::experimental::nd_range_kernel<1>))\nvoid probe(int* x) {\n"
                        "  size_t i = sycl::ext::oneapi::this_work_item::get_nd_item<1>().get_global_id(0);\n"
                        "  x[i] = (int)i * VALUE;\n}\n"));
        auto exe = syclex::build(src, syclex::properties{syclex::build_options{"-DVALUE=3"}});
        double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        int* x = sycl::malloc_shared<int>(64, q);
        q.submit([&](sycl::handler& h) { h.set_args(x); h.parallel_for(sycl::nd_range<1>{64, 16}, exe.ext_oneapi_get_kernel("probe")); }).wait_and_throw();
        bool ok = x[63] == 189;
        sycl::free(x, q);
        std::cout << ",\"device\":\"" << esc(chosen.get_info<sycl::info::device::name>())
                  << "\",\"build_seconds\":" << secs << ",\"kernel_ok\":" << (ok ? "true" : "false") << "}\n";
        return ok ? 0 : 1;
    } catch (std::exception& e) {
        std::cerr << "SYCL probe: " << e.what() << "\n";
        return 1;
    }
}
CPP
    if [ ! -x "$dir/probe" ] || ! cmp -s "$dir/probe.cpp.tmp" "$dir/probe.cpp" ||
        [ "$include/sycl/sycl.hpp" -nt "$dir/probe" ]; then
        mv -f "$dir/probe.cpp.tmp" "$dir/probe.cpp"
        log "compiling the SYCL probe with ${CXX:-g++} (a few seconds)"
        "${CXX:-g++}" -std=c++17 -O1 -I"$include" "$dir/probe.cpp" -L"$libdir" -lsycl \
            -Wl,-rpath,"$libdir" -o "$dir/probe" 2>"$dir/probe.log" || {
            tail -n 15 "$dir/probe.log" >&2
            return 1
        }
    else
        rm -f "$dir/probe.cpp.tmp"
    fi
    log "probing SYCL devices and building a test kernel (a few seconds)"
    if [ -n "$vendors" ]; then
        OCL_ICD_VENDORS="${OCL_ICD_VENDORS:-$vendors}" "$dir/probe"
    else
        "$dir/probe"
    fi
}

write_sycl_json() {
    local version="$1" include="$2" libdir="$3" vendors="$4" probe="$5"
    write_runtime_json sycl "$version" "$include" "$libdir" "$vendors" "$probe" <<'PY'
import json, sys
version, include, libdir, vendors, probe = sys.argv[1:6]
probe = json.loads(probe) if probe else {}
data = {
    "runtime": "intel-sycl-rt",
    "version": version or None,
    "include_dir": include,
    "lib_dir": libdir,
    "opencl_vendors_dir": vendors or None,
    "probe": probe,
}
PY
}

report_sycl() {
    "$VPY" - "$RUNTIME/sycl.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
p = d.get("probe") or {}
print(f"[setup] SYCL runtime {d.get('version')} ({p.get('runtime')}): test kernel built from "
      f"source in {p.get('build_seconds', 0):.1f} s on {p.get('device')}, ran "
      f"{'correctly' if p.get('kernel_ok') else 'WRONG'}", file=sys.stderr)
for dev in p.get("devices") or []:
    note = "" if dev.get("can_build_sycl") else " (cannot build SYCL source)"
    print(f"[setup]   device: {dev['name']} [{dev['type']}] on {dev['platform']}{note}",
          file=sys.stderr)
PY
}

# ---------------------------------------------------------------------------------------------
# CUDA: NVRTC and the CUDA runtime headers from PyPI. No GPU or driver is needed to compile;
# kf-backend-cuda loads libcuda.so.1 from the system (the GPU driver) where there is one.

cuda_hint() {
    cat >&2 <<'EOF'
[setup] Without PyPI: a CUDA toolkit (NVRTC 12.x) works too; kf-backend-cuda looks in
[setup] $CUDA_HOME, $CUDA_PATH and /usr/local/cuda, or set KF_CUDA_NVRTC to libnvrtc.so.12.
EOF
}

# True when both CUDA wheels are installed at the pinned minor version.
cuda_installed() {
    local pkg version
    for pkg in nvidia-cuda-nvrtc-cu12 nvidia-cuda-runtime-cu12; do
        version="$("$VPY" -m pip show "$pkg" 2>/dev/null | sed -n 's/^Version: //p')"
        case "$version" in "$CUDA_SERIES".*) ;; *) return 1 ;; esac
    done
}

setup_cuda() {
    ensure_venv
    if [ "$PROBE_ONLY" -eq 0 ]; then
        if [ "$UPGRADE" -eq 1 ] || ! cuda_installed; then
            PIP_SIZE="about 95 MB, 230 MB installed" pip_install "${CUDA_PACKAGES[@]}" || {
                cuda_hint
                return 1
            }
        else
            log "${CUDA_PACKAGES[*]} already installed (--upgrade to update)"
        fi
    fi

    local site nvrtc builtins libdir include
    site="$("$VPY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
    nvrtc="$(find "$site/nvidia/cuda_nvrtc" -name 'libnvrtc.so.12' 2>/dev/null | head -n 1)"
    [ -n "$nvrtc" ] || {
        warn "libnvrtc.so.12 not found under $site/nvidia/cuda_nvrtc (is nvidia-cuda-nvrtc-cu12 installed?)"
        cuda_hint
        return 1
    }
    nvrtc="$(realpath "$nvrtc")"
    libdir="$(dirname "$nvrtc")"
    # NVRTC dlopens its builtins library by name at compile time; record it for preloading.
    builtins="$(find "$libdir" -name 'libnvrtc-builtins.so.*' 2>/dev/null | sort | tail -n 1)"
    include="$site/nvidia/cuda_runtime/include"
    if [ ! -f "$include/cuda_fp16.h" ]; then
        warn "cuda_fp16.h not found in $include (is nvidia-cuda-runtime-cu12 installed?); kernels including CUDA headers will not compile"
        include=""
    fi

    mkdir -p "$RUNTIME/env.d"
    write_file "$RUNTIME/env.d/cuda.sh" cat <<EOF
# Written by scripts/setup.sh --cuda; sourced by .runtime/env.sh.
export LD_LIBRARY_PATH="$libdir\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
export KF_CUDA_NVRTC="$RUNTIME/cuda.json"
EOF
    write_env_sh

    local probe_json
    probe_json="$(probe_cuda "$nvrtc" "$builtins" "$include")" || probe_json=""
    write_cuda_json "$nvrtc" "$builtins" "$libdir" "$include" "$probe_json"
    if [ -z "$probe_json" ]; then
        warn "the NVRTC probe failed: NVRTC is installed but did not compile a test kernel"
        return 1
    fi
    log "CUDA (NVRTC) ready: $RUNTIME/cuda.json"
}

# Prints a JSON object {nvrtc_version, archs, arch, compile_ms, driver: {...}} after compiling a
# small kernel (with cuda_fp16.h) through the same library kf-backend-cuda loads; `driver` says
# whether libcuda.so.1 and a GPU are present (informational: the backend asks the driver itself).
probe_cuda() {
    "$VPY" - "$@" <<'PY'
import ctypes, json, sys, time

nvrtc_path, builtins, include = sys.argv[1:4]
if builtins:
    ctypes.CDLL(builtins, mode=ctypes.RTLD_GLOBAL)
nv = ctypes.CDLL(nvrtc_path, mode=ctypes.RTLD_GLOBAL)
c_int, vp = ctypes.c_int, ctypes.c_void_p
major, minor = c_int(), c_int()
if nv.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)) != 0:
    sys.exit("nvrtcVersion failed")
n = c_int()
nv.nvrtcGetNumSupportedArchs(ctypes.byref(n))
archs = (c_int * n.value)()
nv.nvrtcGetSupportedArchs(archs)
archs = list(archs)
arch = 90 if 90 in archs else archs[-1]
if include:
    src = (b'#include <cuda_fp16.h>\n'
           b'extern "C" __global__ void probe(float* x) { x[threadIdx.x] = __half2float(__float2half(1.0f)); }\n')
else:
    src = b'extern "C" __global__ void probe(float* x) { x[threadIdx.x] = 1.0f; }\n'
prog = vp()
if nv.nvrtcCreateProgram(ctypes.byref(prog), src, b"probe.cu", 0, None, None) != 0:
    sys.exit("nvrtcCreateProgram failed")
opts = [f"--gpu-architecture=sm_{arch}".encode(), b"--ptxas-options=-v"]
if include:
    opts.append(f"--include-path={include}".encode())
started = time.time()
rc = nv.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts))
ms = (time.time() - started) * 1e3
size = ctypes.c_size_t()
nv.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
log = ctypes.create_string_buffer(size.value)
nv.nvrtcGetProgramLog(prog, log)
if rc != 0:
    sys.exit("the test kernel did not compile:\n" + log.value.decode(errors="replace"))

driver = {"present": False}
try:
    cu = ctypes.CDLL("libcuda.so.1")
    driver["present"] = True
    rc = cu.cuInit(0)
    if rc != 0:
        driver["note"] = f"cuInit returned {rc}"
    else:
        v = c_int()
        cu.cuDriverGetVersion(ctypes.byref(v))
        driver["version"] = f"{v.value // 1000}.{v.value % 1000 // 10}"
        count = c_int()
        cu.cuDeviceGetCount(ctypes.byref(count))
        driver["devices"] = []
        for i in range(count.value):
            dev = c_int()
            cu.cuDeviceGet(ctypes.byref(dev), i)
            name = ctypes.create_string_buffer(256)
            cu.cuDeviceGetName(name, 256, dev)
            ma, mi = c_int(), c_int()
            cu.cuDeviceGetAttribute(ctypes.byref(ma), 75, dev)
            cu.cuDeviceGetAttribute(ctypes.byref(mi), 76, dev)
            driver["devices"].append({"name": name.value.decode(errors="replace"),
                                      "arch": f"sm_{ma.value}{mi.value}"})
except OSError:
    driver["note"] = "libcuda.so.1 not found"
print(json.dumps({"nvrtc_version": f"{major.value}.{minor.value}",
                  "archs": [f"sm_{a}" for a in archs], "arch": f"sm_{arch}",
                  "compile_ms": round(ms, 1), "driver": driver}))
PY
}

write_cuda_json() {
    local nvrtc="$1" builtins="$2" libdir="$3" include="$4" probe="$5"
    write_runtime_json cuda "$nvrtc" "$builtins" "$libdir" "$include" "$probe" <<'PY'
import json, sys
nvrtc, builtins, libdir, include, probe = sys.argv[1:6]
probe = json.loads(probe) if probe else {}
data = {
    "runtime": "nvidia-cuda-nvrtc-cu12",
    "nvrtc": nvrtc,
    "lib_dir": libdir,
    "preload": [builtins] if builtins else [],
    "include_dirs": [include] if include else [],
    "nvrtc_version": probe.get("nvrtc_version"),
    "archs": probe.get("archs", []),
    "probe": probe,
}
PY
}

report_cuda() {
    "$VPY" - "$RUNTIME/cuda.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
p = d.get("probe") or {}
archs = d.get("archs") or ["?"]
print(f"[setup] NVRTC {d.get('nvrtc_version')}: test kernel compiled for {p.get('arch')} in "
      f"{p.get('compile_ms')} ms; targets {archs[0]}..{archs[-1]}", file=sys.stderr)
drv = p.get("driver") or {}
for dev in drv.get("devices") or []:
    print(f"[setup]   GPU: {dev['name']} ({dev['arch']}), driver CUDA {drv.get('version')}",
          file=sys.stderr)
if not drv.get("devices"):
    print(f"[setup]   no GPU here ({drv.get('note', 'no CUDA device')}): CUDA kernels compile "
          "and report resources; running them needs a GPU", file=sys.stderr)
PY
}

# ---------------------------------------------------------------------------------------------
# PyTorch (CPU use) for KernelBench references

setup_torch() {
    mkdir -p "$RUNTIME"
    ensure_venv
    if [ "$UPGRADE" -eq 0 ] && venv_has torch numpy; then
        log "torch already installed (--upgrade to update)"
    elif [ "$PROBE_ONLY" -eq 0 ]; then
        PIP_SIZE="about 1.5 GB download, 5.4 GB on disk with the NVIDIA wheels torch requires" \
            pip_install torch numpy || return 1
    fi
    local version
    version="$("$VPY" -c 'import torch; print(torch.__version__)' 2>&1 | tail -n 1)" ||
        { warn "import torch failed: $version"; return 1; }
    log "PyTorch $version imports; kf task import-kernelbench will use it for references"
}

# ---------------------------------------------------------------------------------------------

write_env_sh() {
    write_file "$RUNTIME/env.sh" cat <<'EOF'
# Written by scripts/setup.sh: `source .runtime/env.sh` to use the project-local runtimes from a
# shell (clinfo, Python). Rust code does not need it: kf-backend-opencl reads opencl.json and
# kf-backend-cuda reads cuda.json.
_kf_runtime_dir="$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")" && pwd)"
for _kf_f in "$_kf_runtime_dir"/env.d/*.sh; do
    [ -e "$_kf_f" ] && . "$_kf_f"
done
unset _kf_f _kf_runtime_dir
EOF
}

main() {
    parse_args "$@"
    case "$RUNTIME" in
    "$ROOT"/.runtime | "$ROOT"/.runtime/*) ;;
    *) log "runtime dir $RUNTIME is outside the repository: kf-backend-opencl will not find it by itself; point KF_OPENCL_ICD at $RUNTIME/opencl.json (and KF_CUDA_NVRTC at $RUNTIME/cuda.json)" ;;
    esac
    local status=0
    if [ "$WANT_POCL" -eq 1 ]; then setup_pocl || status=1; fi
    if [ "$WANT_BROWSER" -eq 1 ]; then setup_browser || status=1; fi
    if [ "$WANT_OPENCL" -eq 1 ]; then
        if setup_opencl; then report_opencl; else status=1; fi
    fi
    if [ "$WANT_SYCL" -eq 1 ]; then
        if setup_sycl; then report_sycl; else status=1; fi
    fi
    if [ "$WANT_CUDA" -eq 1 ]; then
        if setup_cuda; then report_cuda; else status=1; fi
    fi
    if [ "$WANT_TORCH" -eq 1 ]; then setup_torch || status=1; fi
    # Always: task files' Python references need NumPy in the same venv.
    setup_numpy || status=1
    if [ "$WANT_PYOPENCL" -eq 1 ]; then setup_pyopencl || status=1; fi
    [ "$status" -eq 0 ] && log "done; shells may 'source $RUNTIME/env.sh'"
    return "$status"
}

main "$@"
