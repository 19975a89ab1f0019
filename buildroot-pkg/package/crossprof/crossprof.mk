################################################################################
#
# crossprof
#
################################################################################

# The last release's version (scripts/release.sh sets it with the hashes); tests/packaging/
# check.sh fails when it is not the version of the Yocto recipe's release commit.
CROSSPROF_VERSION = 0.1.0
# The release tarball, `git archive` of the v$(CROSSPROF_VERSION) tag (scripts/release.sh).
# Buildroot vendors its crates at download time and keeps the result as CROSSPROF_SOURCE,
# crossprof-<version>-cargoN.tar.gz, N being the vendoring format of its Rust version; a
# Buildroot release checks it against the line for that name in crossprof.hash, one line per
# format. The query part names the file to fetch, which the site ignores.
CROSSPROF_SITE = https://example.invalid/crossprof/releases/download/v$(CROSSPROF_VERSION)/crossprof-$(CROSSPROF_VERSION).tar.gz?buildroot-path=filename
CROSSPROF_LICENSE = MIT or Apache-2.0
# Set apart: inherited from CROSSPROF_LICENSE, it would get the cargo infrastructure's
# "vendored dependencies" note twice.
HOST_CROSSPROF_LICENSE = MIT or Apache-2.0
CROSSPROF_LICENSE_FILES = LICENSE-MIT LICENSE-APACHE
# rec and the interposer, unstripped, for hostside's sysroot.
CROSSPROF_INSTALL_STAGING = YES

# The vendoring at download time replaces .cargo/config.toml in the source tree, so nothing
# the build needs may live there: the build-id flag is given here.

# Release code. BR2_ENABLE_DEBUG decides the debug info (through PKG_CARGO_ENV) and
# BR2_STRIP_strip strips the target copies: cargo itself must not strip, or output/staging
# loses the symbols hostside reads. Every binary carries a build-id, which hostside matches.
CROSSPROF_RUSTFLAGS = -C link-arg=-Wl,--build-id=sha1
ifeq ($(NORMALIZED_ARCH),arm)
# Keep the pkg-cargo workaround that our RUSTFLAGS below replace.
CROSSPROF_RUSTFLAGS += -C link-arg=-Wl,--allow-multiple-definition
# The ARMv7 interposer finds its callers' registers through each hook's frame record.
CROSSPROF_HEAP_RUSTFLAGS = -C force-frame-pointers=yes
endif

CROSSPROF_RUSTFLAGS_VAR = CARGO_TARGET_$(call UPPERCASE,$(RUSTC_TARGET_NAME))_RUSTFLAGS
CROSSPROF_BIN_DIR = $(@D)/target/$(RUSTC_TARGET_NAME)/release

CROSSPROF_CARGO_ENV = CARGO_PROFILE_RELEASE_STRIP=false

# The same offline, locked build as the cargo-package default, but of the
# workspace's packages: rec is static on a musl toolchain (crt-static is the
# default there), the interposer is a cdylib and needs a run without crt-static.
define CROSSPROF_BUILD_CMDS
	cd $(CROSSPROF_SRCDIR) && \
	$(TARGET_MAKE_ENV) $(TARGET_CONFIGURE_OPTS) $(PKG_CARGO_ENV) \
		$(CROSSPROF_CARGO_ENV) \
		$(CROSSPROF_RUSTFLAGS_VAR)="$(CROSSPROF_RUSTFLAGS)" \
		cargo build --offline --locked --release \
			--manifest-path Cargo.toml -p rec
	$(CROSSPROF_BUILD_HEAP)
endef

ifeq ($(BR2_PACKAGE_CROSSPROF_HEAP),y)
define CROSSPROF_BUILD_HEAP
	cd $(CROSSPROF_SRCDIR) && \
	$(TARGET_MAKE_ENV) $(TARGET_CONFIGURE_OPTS) $(PKG_CARGO_ENV) \
		$(CROSSPROF_CARGO_ENV) \
		$(CROSSPROF_RUSTFLAGS_VAR)="$(CROSSPROF_RUSTFLAGS) $(CROSSPROF_HEAP_RUSTFLAGS) -C target-feature=-crt-static" \
		cargo build --offline --locked --release \
			--manifest-path Cargo.toml -p crossprof-heap
endef

# rec --heap looks for the interposer in ../lib/crossprof/ from its own directory.
define CROSSPROF_INSTALL_HEAP
	$(INSTALL) -D -m 0755 $(CROSSPROF_BIN_DIR)/libcrossprof_heap.so \
		$(1)/usr/lib/crossprof/libcrossprof_heap.so
endef
endif

# cargo-package's default "cargo install --bins" cannot install a cdylib,
# and does not work on a virtual workspace manifest.
define CROSSPROF_INSTALL_TARGET_CMDS
	$(INSTALL) -D -m 0755 $(CROSSPROF_BIN_DIR)/rec $(TARGET_DIR)/usr/bin/rec
	$(call CROSSPROF_INSTALL_HEAP,$(TARGET_DIR))
endef

define CROSSPROF_INSTALL_STAGING_CMDS
	$(INSTALL) -D -m 0755 $(CROSSPROF_BIN_DIR)/rec $(STAGING_DIR)/usr/bin/rec
	$(call CROSSPROF_INSTALL_HEAP,$(STAGING_DIR))
endef

# hostside, for the build machine.
HOST_CROSSPROF_CARGO_BUILD_OPTS = -p hostside

define HOST_CROSSPROF_INSTALL_CMDS
	$(INSTALL) -D -m 0755 $(@D)/target/release/hostside $(HOST_DIR)/bin/hostside
endef

$(eval $(cargo-package))
$(eval $(host-cargo-package))
