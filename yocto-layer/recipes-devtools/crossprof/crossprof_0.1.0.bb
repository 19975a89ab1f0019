SUMMARY = "Profiler for embedded Linux: record on the board, analyse on the host"
DESCRIPTION = "crossprof records raw CPU samples and heap allocations on the target with \
rec (and the heap interposer libcrossprof_heap.so that rec --heap preloads); \
hostside symbolizes the recording on the developer's machine against the image's \
debug rootfs. The target package holds rec and the interposer only; hostside comes \
from crossprof-native and nativesdk-crossprof."
HOMEPAGE = "https://example.invalid/crossprof"
SECTION = "devel"
# oe-core from July 2026 (master after wrynose) parses LICENSE as an SPDX expression and warns
# about "|"; every earlier release knows only "|" and would take "OR" for a license name. The
# SPDX parser's module tells the two apart.
LICENSE = "${@'Apache-2.0 OR MIT' if hasattr(oe, 'spdx_license') else 'MIT | Apache-2.0'}"
LIC_FILES_CHKSUM = "file://LICENSE-MIT;md5=c444ad7adfc04f3f4c64b5edec39cddc \
                    file://LICENSE-APACHE;md5=3b83ef96387f14655fc854ddc3c6bd57"

# The source, its commit and its crate list, each one variable that local.conf can set for
# crossprof, crossprof-native and nativesdk-crossprof at once (see "Building a git checkout"
# in README.md). destsuffix=${BP} unpacks to the default S of every release: ${WORKDIR}/${BP}
# on scarthgap, ${UNPACKDIR}/${BP} from whinlatter on. So S is never set here.
CROSSPROF_GIT_URI ?= "git://example.invalid/crossprof.git;protocol=https;branch=main"
SRC_URI = "${CROSSPROF_GIT_URI};destsuffix=${BP}"
# The commit of the v${PV} tag; scripts/release.sh updates it with the crate list below.
CROSSPROF_SRCREV ?= "72f5ef37579e639d88cba85ee22de87671148488"
SRCREV = "${CROSSPROF_SRCREV}"
# Every crates.io package of that commit's Cargo.lock, for bitbake's crate fetcher.
CROSSPROF_CRATES_INC ?= "${BPN}-crates.inc"
require ${CROSSPROF_CRATES_INC}

inherit cargo cargo-update-recipe-crates

# `bitbake -c update_crates` lists the crates of every Cargo.lock under CARGO_LOCK_SRC_DIR
# (S by default), and fuzz/ is a workspace of its own with its own lock file, whose crates
# this recipe never builds. Show the class the workspace's lock file alone.
CARGO_LOCK_SRC_DIR = "${WORKDIR}/workspace-lock"
do_update_crates:prepend() {
    rm -rf ${CARGO_LOCK_SRC_DIR}
    mkdir -p ${CARGO_LOCK_SRC_DIR}
    cp ${S}/Cargo.lock ${CARGO_LOCK_SRC_DIR}/
}

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
# On 32-bit ARM the heap interposer finds its callers' registers through each hook's frame
# record (without it, heap stacks are the allocation site alone). "arm" is the TARGET_ARCH
# override of 32-bit ARM, which oelint-adv's list of known overrides does not hold:
# nooelint: oelint.vars.specific
RUSTFLAGS:append:arm = " -C force-frame-pointers=yes"

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
