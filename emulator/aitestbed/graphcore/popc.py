"""`popc`: the Poplar codelet compiler. Only `popc --version` works in the emulation.

The version is that of the SDK the node enables (AITESTBED_POPLAR_VERSION,
default 3.3.0); the two lines are Poplar's own. Compiling codelets needs the
real Poplar C++ toolchain, which the emulated SDK does not have.
"""

from __future__ import annotations

import argparse
import os
import sys

DEFAULT_VERSION = "3.3.0"
# SDK version -> (Poplar build hash, clang version, clang commit), as `popc --version` prints them.
VERSIONS: dict[str, tuple[str, str, str]] = {
    "3.3.0": ("de1f8de2a7", "16.0.0", "2fce0648f3c328b23a6cbc664fc0dd0630122212"),
    "3.1.0": ("e12d5f9f01", "15.0.0", "bab932b4fc4cdb58bb009370384b2c41579bd9d9"),
}
NO_COMPILER = ("popc: the emulated Poplar SDK has no Poplar C++ compiler: codelets (.cpp) "
               "cannot be compiled here; only `popc --version` is available")


class UnknownVersionError(ValueError):
    pass


def version_lines(version: str) -> list[str]:
    """The two lines `popc --version` prints for an SDK version."""
    if version not in VERSIONS:
        raise UnknownVersionError(
            f"popc: unknown Poplar SDK version '{version}' in AITESTBED_POPLAR_VERSION "
            f"(this emulation knows {', '.join(sorted(VERSIONS))})")
    build, clang, commit = VERSIONS[version]
    return [f"POPLAR version {version} ({build})", f"clang version {clang} ({commit})"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="popc", usage="popc [options] <codelet.cpp ...>",
        description="Compile Poplar codelets for the IPU (emulated: --version only).")
    parser.add_argument("--version", action="store_true", help="print the Poplar version and exit")
    args, rest = parser.parse_known_args(argv)
    if args.version:
        try:
            lines = version_lines(os.environ.get("AITESTBED_POPLAR_VERSION") or DEFAULT_VERSION)
        except UnknownVersionError as err:
            print(err, file=sys.stderr)
            return 1
        print("\n".join(lines))
        return 0
    if not rest:
        parser.print_usage(sys.stderr)
        print("popc: error: no input files", file=sys.stderr)
        return 1
    print(NO_COMPILER, file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
