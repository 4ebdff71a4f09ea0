# bench/gpu/prebuilt.sh — sourced by s_common.sh (s_begin) and final_check.sh: the one unpacking of
# a packed prebuild (bench/gpu/prebuild.sh with FLASHC_PREBUILD_TESTS: DIR/pk.tar.xz holding
# libflashc.so and tests/NAME).
# prebuilt_unpack DIR — unpacks DIR/pk.tar.xz into DIR once (not where DIR/libflashc.so exists);
# returns 1 with a message if the archive does not unpack.
prebuilt_unpack() {
  [ -f "$1/pk.tar.xz" ] && [ ! -e "$1/libflashc.so" ] || return 0
  python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" \
    "$1/pk.tar.xz" "$1" || { echo "cannot unpack $1/pk.tar.xz"; return 1; }
}
