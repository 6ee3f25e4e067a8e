#!/usr/bin/env python3
"""Linker launcher (CMake's CXX_LINKER_LAUNCHER) that links a program's libraries statically.

Contract: argv[1:] is the compiler's link command as CMake wrote it. Every shared library on it
(a path .../libNAME.so[.VERSION], or -lNAME) whose static archive libNAME.a lies beside it (or, for
-lNAME, in the directories of the other libraries) is replaced by that archive, except the C and C++
runtimes and the libraries named in XV_KEEP_SHARED (comma separated; they keep their .so because
their archives are missing or because they share a runtime with libraries that stay shared). The
libraries are linked as one group (static archives of one package refer to each other in any
order) into a position-dependent executable. Then the rewritten command runs; its exit status is
the launcher's.

Why (bench/README.md, "Session 11, the whole run"): a dynamically linked xvctl loads 63 shared
objects, and the dynamic loader's relocations and page faults were 85 % of the 27-40 ms an
`xvctl --help` took on the 2-core machine, before it did anything; statically linked, the same
start takes 10-15 ms. xvctl is a program that people and agents start once per command.
"""
import os
import re
import subprocess
import sys

# Shared on purpose: the C library and the C++ runtime, one copy per process, which the libraries
# that stay shared (spdlog and fmt: Debian ships no archives of them) use too.
ALWAYS_SHARED = {"c", "m", "dl", "rt", "pthread", "stdc++", "gcc_s", "gcc", "atomic"}

SHARED_PATH = re.compile(r"^(?P<dir>/.*)/lib(?P<name>[^/]+?)\.so(\.[0-9.]+)?$")


def main(argv):
    if not argv:
        sys.stderr.write("static_link_launcher: no link command given\n")
        return 2
    keep = ALWAYS_SHARED | {n for n in os.environ.get("XV_KEEP_SHARED", "").split(",") if n}
    lib_dirs = []
    for arg in argv:
        m = SHARED_PATH.match(arg)
        if m and m.group("dir") not in lib_dirs:
            lib_dirs.append(m.group("dir"))

    out = []
    first_library = None
    for arg in argv[1:]:
        m = SHARED_PATH.match(arg)
        if m and m.group("name") not in keep:
            archive = "%s/lib%s.a" % (m.group("dir"), m.group("name"))
            if os.path.exists(archive):
                arg = archive
        elif arg.startswith("-l") and not arg.startswith("-l:") and arg[2:] not in keep:
            name = arg[2:]
            if any(os.path.exists("%s/lib%s.a" % (d, name)) for d in lib_dirs):
                arg = "-l:lib%s.a" % name
        is_library = arg.startswith("-l") or arg.endswith((".a", ".so")) or SHARED_PATH.match(arg)
        if is_library and first_library is None:
            first_library = len(out)
        out.append(arg)
    if first_library is not None:
        out.insert(first_library, "-Wl,--start-group")
        out.append("-Wl,--end-group")
    # Position-dependent: a PIE's relative relocations are most of what a static gRPC costs the
    # loader at start.
    command = [argv[0], "-no-pie"] + out
    return subprocess.call(command)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
