#!/usr/bin/env python3
"""SASS and register use of one kernel file, without a GPU (a development aid).

Compiles `DIR/MODULE.cu` with the headers `DIR/include/*` and `DIR/kernels.def` handed to
NVRTC by name, as the engine does (NVRTC, `-std=c++17`), but
for a real architecture, takes the cubin (`nvrtcGetCUBIN`) and disassembles it with
`cuobjdump -sass -res-usage`. Prints each kernel's registers, stack and instruction count
(NOPs excluded); `--sass KERNEL` prints that kernel's instructions.

    scripts/kernel-sass.py [--dir cuda] [--module leaves_codes] [--arch sm_90] [--sass KERNEL]

Needs libnvrtc (`NVRTC_LIB`, default: `libnvrtc.so.13` on the loader path, e.g. the CI's
`target/ci-python/nvidia/cu13/lib` in LD_LIBRARY_PATH) and cuobjdump (`CUOBJDUMP`, default:
on PATH; `pip download --no-deps nvidia-cuda-cuobjdump` and unzip the wheel for one), which
runs nvdisasm (on PATH: `pip download --no-deps nvidia-cuda-nvdisasm`, unzipped).
"""
import argparse
import ctypes
import os
import re
import subprocess
import sys
import tempfile


def cubin(src, name, arch, headers):
    lib = ctypes.CDLL(os.environ.get("NVRTC_LIB", "libnvrtc.so.13"))
    prog = ctypes.c_void_p()
    names = list(headers)
    texts = (ctypes.c_char_p * len(names))(*[headers[h].encode() for h in names])
    includes = (ctypes.c_char_p * len(names))(*[h.encode() for h in names])
    if lib.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), name.encode(), len(names), texts, includes):
        sys.exit("nvrtcCreateProgram failed")
    opts = [f"--gpu-architecture={arch}".encode(), b"-std=c++17"]
    failed = lib.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts))
    n = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
    log = ctypes.create_string_buffer(n.value)
    lib.nvrtcGetProgramLog(prog, log)
    if failed:
        sys.exit(log.value.decode())
    lib.nvrtcGetCUBINSize(prog, ctypes.byref(n))
    out = ctypes.create_string_buffer(n.value)
    lib.nvrtcGetCUBIN(prog, out)
    return out.raw


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default=os.path.join(os.path.dirname(__file__), "..", "cuda"))
    ap.add_argument("--module", default="leaves_codes")
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--sass", metavar="KERNEL", help="print this kernel's instructions")
    a = ap.parse_args()
    headers = {}
    include = os.path.join(a.dir, "include")
    for h in os.listdir(include):
        with open(os.path.join(include, h)) as f:
            headers[h] = f.read()
    with open(os.path.join(a.dir, "kernels.def")) as f:
        headers["kernels.def"] = f.read()
    with open(os.path.join(a.dir, a.module + ".cu")) as f:
        src = f.read()
    with tempfile.NamedTemporaryFile(suffix=".cubin") as tmp:
        tmp.write(cubin(src, a.module + ".cu", a.arch, headers))
        tmp.flush()
        tool = os.environ.get("CUOBJDUMP", "cuobjdump")
        text = subprocess.run([tool, "-sass", "-res-usage", tmp.name], capture_output=True, text=True, check=True).stdout
    usage = dict(re.findall(r"Function (\w+):\n\s+(REG:\d+ STACK:\d+)", text))
    bodies = re.split(r"\n\s+Function : ", text)[1:]
    for body in bodies:
        name, _, code = body.partition("\n")
        instrs = [l for l in code.splitlines() if re.match(r"\s+/\*[0-9a-f]{4,}\*/", l) and "NOP" not in l]
        if a.sass:
            if name == a.sass:
                print("\n".join(re.sub(r"\s*/\* 0x[0-9a-f]+ \*/", "", l) for l in instrs))
        else:
            print(f"{name:40} {usage.get(name, '?'):22} {len(instrs)} instructions")


if __name__ == "__main__":
    main()
