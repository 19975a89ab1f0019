SUMMARY = "Profiler for embedded Linux: record on the board, analyse on the host"
DESCRIPTION = "crossprof records raw CPU samples and heap allocations on the target with \
rec (and the heap interposer libcrossprof_heap.so that rec --heap preloads); \
hostside symbolizes the recording on the developer's machine against the image's \
debug rootfs. The target package holds rec and the interposer only; hostside comes \
from crossprof-native and nativesdk-crossprof."
HOMEPAGE = "https://example.invalid/crossprof"
SECTION = "devel"
LICENSE = "MIT | Apache-2.0"
LIC_FILES_CHKSUM = "file://LICENSE-MIT;md5=c444ad7adfc04f3f4c64b5edec39cddc \
                    file://LICENSE-APACHE;md5=3b83ef96387f14655fc854ddc3c6bd57"

# destsuffix=${BP} unpacks to the default S of every release: ${WORKDIR}/${BP} on scarthgap,
# ${UNPACKDIR}/${BP} from whinlatter on. So S is never set here (see README.md).
SRC_URI = "git://example.invalid/crossprof.git;protocol=https;branch=main;destsuffix=${BP}"
# The commit of the v${PV} tag; the release checklist updates it with PV and the crates list.
SRCREV = "6e78501c906e02b124bdcbe61198ddf955003669"

require ${BPN}-crates.inc

inherit cargo cargo-update-recipe-crates

# The workspace's [profile.distro]: release code, full DWARF, not stripped, so that the -dbg
# package (and the image's debug rootfs) holds what hostside needs and the already-stripped QA
# check passes. CARGO_PROFILE is oe-core master's knob; BUILD_MODE and BUILD_DIR the ones of
# scarthgap up to wrynose. oelint-adv's variable list predates CARGO_PROFILE:
# nooelint: oelint.vars.mispell.unknown
CARGO_PROFILE = "distro"
BUILD_MODE = "--profile=distro"
BUILD_DIR = "distro"

# Every binary crossprof ships carries a build-id: hostside matches debug files by it.
RUSTFLAGS:append = " -C link-arg=-Wl,--build-id=sha1"

# The target gets the recorder and the interposer, the host and the SDK get hostside.
CARGO_BUILD_FLAGS:append:class-target = " -p rec -p crossprof-heap"
CARGO_BUILD_FLAGS:append:class-native = " -p hostside"
CARGO_BUILD_FLAGS:append:class-nativesdk = " -p hostside"

# cargo_do_install installs executables only. The interposer goes to a subdirectory, where rec
# finds it (../lib/crossprof/ from its own directory) and where an unversioned .so is not taken
# for a development symlink (dev-elf QA).
do_install:append:class-target() {
    install -d ${D}${libdir}/crossprof
    install -m 0755 ${B}/target/${CARGO_TARGET_SUBDIR}/libcrossprof_heap.so \
        ${D}${libdir}/crossprof/libcrossprof_heap.so
}

FILES:${PN}:append:class-target = " ${libdir}/crossprof/libcrossprof_heap.so"

BBCLASSEXTEND = "native nativesdk"
