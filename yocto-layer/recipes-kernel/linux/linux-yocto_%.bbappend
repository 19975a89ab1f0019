# The kernel options crossprof's rec uses, on request: with CROSSPROF_KERNEL_CONFIG = "1" in
# local.conf the kernel merges files/crossprof.cfg (see README.md). Without it this layer
# leaves the kernel untouched, as the Yocto Project's layer compatibility rules require.
require ${@'linux-yocto-crossprof.inc' if d.getVar('CROSSPROF_KERNEL_CONFIG') == '1' else ''}
