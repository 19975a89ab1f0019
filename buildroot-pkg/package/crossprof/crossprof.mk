################################################################################
#
# crossprof
#
################################################################################

# The workspace version ([workspace.package] in Cargo.toml); tests/packaging/check.sh
# fails when the two disagree.
CROSSPROF_VERSION = 0.1.0
CROSSPROF_SITE = https://example.invalid/crossprof/releases/download/v$(CROSSPROF_VERSION)
CROSSPROF_LICENSE = MIT or Apache-2.0
CROSSPROF_LICENSE_FILES = LICENSE-MIT LICENSE-APACHE
# rec and the interposer, unstripped, for hostside's sysroot.
CROSSPROF_INSTALL_STAGING = YES

# Release code. BR2_ENABLE_DEBUG decides the debug info (through PKG_CARGO_ENV) and
# BR2_STRIP_strip strips the target copies: cargo itself must not strip, or output/staging
# loses the symbols hostside reads. Every binary carries a build-id, which hostside matches.
CROSSPROF_RUSTFLAGS = -C link-arg=-Wl,--build-id=sha1
ifeq ($(NORMALIZED_ARCH),arm)
# Keep the pkg-cargo workaround that our RUSTFLAGS below replace.
CROSSPROF_RUSTFLAGS += -C link-arg=-Wl,--allow-multiple-definition
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
		$(CROSSPROF_RUSTFLAGS_VAR)="$(CROSSPROF_RUSTFLAGS) -C target-feature=-crt-static" \
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
