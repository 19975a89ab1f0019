#!/usr/bin/env bash
# Rebuilds the images the `unwind` fuzz target splices its input into (one per architecture,
# from unwind_base.c, with Debian's cross compilers) and the ELF seeds of `elf_symbols`.
set -euo pipefail
cd "$(dirname "$0")"
common=(-O2 -fdebug-prefix-map="$PWD"=. -nostdlib -static -Wl,--build-id=sha1 -Wl,--eh-frame-hdr)
gcc "${common[@]}" -fasynchronous-unwind-tables -o unwind_base.x86_64 unwind_base.c
aarch64-linux-gnu-gcc "${common[@]}" -fasynchronous-unwind-tables -o unwind_base.aarch64 unwind_base.c
arm-linux-gnueabihf-gcc "${common[@]}" -mthumb -funwind-tables -g -o unwind_base.arm unwind_base.c
i686-linux-gnu-gcc "${common[@]}" -fno-asynchronous-unwind-tables -g -o unwind_base.x86 unwind_base.c
riscv64-linux-gnu-gcc "${common[@]}" -fasynchronous-unwind-tables -o unwind_base.riscv64 unwind_base.c
