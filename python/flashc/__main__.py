"""`python -m flashc`: what this installation is made of (package, library, build, devices).

Exits 1 with the loader's explanation when no usable libflashc is found, so it doubles as an
installation check.
"""

from __future__ import annotations

import sys

import flashc


def main() -> int:
    print(f"flashc package {flashc.__version__} ({flashc.__file__})")
    try:
        path = flashc.library_path()
    except OSError as e:
        print(e, file=sys.stderr)
        return 1
    print(f"library:        {path}")
    print(f"library version {flashc.library_version()}")
    print(f"build:          {flashc.build_info()}")
    print(f"cuda device:    {'yes' if flashc.cuda_available() else 'no'}")
    print(f"threads:        {flashc.get_num_threads()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
